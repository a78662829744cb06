package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
)

// Collections and key layout. Every key starts with the tenant and "/"
// (tenants are [A-Za-z0-9._-]{1,64}, so no tenant's prefix is another's).
// ts is createdKey(created_at): 16 hex digits that sort in time order, so
// reverse scans give newest first (created_at desc, then id desc).
//
//	cp_deployments          tenant/id                    -> storedDeployment JSON (storageform.go)
//	cp_deployment_order     tenant/ts/id                 -> "" (unfiltered pages skip these small keys)
//	cp_deployment_summaries tenant/ts/id                 -> summary (lowercased name, status, type, source, image version)
//	cp_deployment_name_blocks tenant/ts/id (first)       -> up to 256 lowercased names, '\n'-separated (nameblocks.go)
//	cp_deployment_index     tenant/field/value/ts/id     -> "" (field: status, type, source, image, tag, listener, push)
//	cp_deployment_names     tenant/name                  -> id (names not yet removed)
//	cp_revisions            tenant/deployment/id         -> storedRevision JSON (storageform.go)
//	cp_revision_order       tenant/deployment/ts/id      -> status
//	cp_listeners            tenant/id                    -> Listener JSON
//	cp_listener_order       tenant/ts/id                 -> ""
//	cp_listener_compute_ids tenant/escaped compute id    -> id
//	cp_integrations         tenant/id                    -> integrationRecord JSON
//	cp_integration_installs tenant/installation id       -> id
//	cp_tracing_projects     tenant/deployment id         -> storedTracingProject JSON (StoreTracingProjects)
//	cp_pending              r/tenant/deployment/ts/rev   -> lease (a revision not terminal; worker.go)
//	cp_pending              d/tenant/deployment          -> lease (a deployment AWAITING_DELETE)
//	cp_installation_owners  installation id              -> tenant/integration id (github.go)
//	cp_github_install_states s/sha256(state)             -> tenant and expiry; e/expiry/s/sha256(state) -> ""
//	cp_webhook_deliveries   d/sha256(delivery id), b/sha256(body digest) -> time seen; e/time/key -> ""
//
// This is the storage layout, for maintainers (the package doc tells users
// only what they can rely on). It lives here, beside the code that writes
// it, so that a change to one shows in the same diff as the other.
//
// A deployment is one record; next to it, in the same Update, putDeployment
// keeps its order record (a reverse scan lists newest first, an offset
// skips small keys), its summary under the same key (filters are checked
// against it without decoding the deployment), its index records (status,
// deployment type, source, image version, tag value id, listener, and push
// for github deployments with build_on_push: a push reads one owner record
// and one index prefix), its name record (uniqueness) and its entry in the
// name blocks (name_contains is one bytes.Index per block of 256 names,
// nameblocks.go). removeDeployment deletes all of them with the revisions
// and the pending work.
//
// Deployment and revision records are in a storage form, separate from
// the wire form (storageform.go): a JSON object whose first member is the
// format version, {"v":1,...}, with short keys (documented on the fields of
// storedDeployment and storedRevision), no ids (the key holds them: the
// record's own id, and a revision's deployment id), timestamps as Unix
// microseconds, secrets sealed under Options.SecretKey ("sx", the JSON of
// the secret list sealed with AAD controlplane/<kind>/<tenant>/<record key>;
// "sec" holds them in plain text when there is no key),
// resource_spec beside source_config rather than inside it, and every null,
// empty or zero member left out. A read of a record whose version is newer
// than recordVersion fails with an error wrapping ErrNewerRecord that names
// the record and both versions. Records without "v" (version 0) are the
// wire JSON that earlier builds stored (the deployment's wire JSON followed
// by tag_value_ids; a revision's followed by its snapshot; timestamps with
// six or fewer fractional digits, testdata/records-before-wiretime.jsonl):
// they still decode, and are rewritten in the current form when next
// written. A change to the storage form that older builds would misread
// bumps recordVersion and keeps decoding the earlier versions. Tracing
// projects of StoreTracingProjects are versioned the same way
// ({"v":1,"n":name,"c":micros}; the key holds tenant and deployment id).
// Listeners, integrations and the other records are still their JSON with
// wire names.
// getDeploymentJSON decodes and encodes: GET costs a decode of the compact
// record (BENCHMARKS.md).
//
// The lifecycle's records follow the work, not the data: cp_pending holds
// one lease per revision not terminal and per deployment AWAITING_DELETE
// (claims scan only these, first in a View, so an idle poll writes
// nothing). cp_webhook_deliveries and cp_github_install_states expire
// entries by their e/ index: each write removes up to 8 entries past
// DeliveryRetention or GitHubInstallStateTTL.
const (
	colDeployments          = "cp_deployments"
	colDeploymentOrder      = "cp_deployment_order"
	colDeploymentSums       = "cp_deployment_summaries"
	colDeploymentNameBlocks = "cp_deployment_name_blocks"
	colDeploymentIndex      = "cp_deployment_index"
	colDeploymentNames      = "cp_deployment_names"
	colRevisions            = "cp_revisions"
	colRevisionOrder        = "cp_revision_order"
	colListeners            = "cp_listeners"
	colListenerOrder        = "cp_listener_order"
	colListenerCompute      = "cp_listener_compute_ids"
	colIntegrations         = "cp_integrations"
	colIntegrationInsts     = "cp_integration_installs"
	colTracingProjects      = "cp_tracing_projects"
	colPending              = "cp_pending"
)

// Index fields of cp_deployment_index.
const (
	idxStatus   = "status"
	idxType     = "type"
	idxSource   = "source"
	idxImage    = "image"
	idxTag      = "tag"
	idxListener = "listener"
	idxPush     = "push" // github deployments with build_on_push, by integration id
)

// createdKey encodes t so that byte order is time order.
func createdKey(t time.Time) string {
	return fmt.Sprintf("%016x", uint64(t.UnixMicro())^(1<<63))
}

func key(parts ...string) string { return strings.Join(parts, "/") }

// deploymentRecord is a deployment as the package works on it: the wire
// shape plus the fields that are not on the wire. cp_deployments holds it
// in its storage form (encodeDeployment); its own JSON encoding is the
// unversioned form of earlier builds, which decodeDeployment still reads.
type deploymentRecord struct {
	Deployment
	Tags []string `json:"tag_value_ids"`
}

// tail is the deployment's place in the newest-first order: createdKey/id.
func (r *deploymentRecord) tail() string { return createdKey(r.CreatedAt.Time()) + "/" + r.ID }

func (r *deploymentRecord) orderKey(tenant string) string { return tenant + "/" + r.tail() }

// summary is the value of the deployment's summary record: what the list
// filters other than tags and ids look at, in a form that decodes without
// allocation. The image version comes last so that it may hold any byte.
func (r *deploymentRecord) summary() string {
	var t, img string
	if r.SourceConfig.DeploymentType != nil {
		t = string(*r.SourceConfig.DeploymentType)
	}
	if r.ImageVersion != nil {
		img = "=" + *r.ImageVersion // "=" marks a non-null version
	}
	return strings.ToLower(r.Name) + "\x00" + string(r.Status) + "\x00" + t + "\x00" + string(r.Source) + "\x00" + img
}

// indexKeys lists r's cp_deployment_index keys.
func (r *deploymentRecord) indexKeys(tenant string) []string {
	tail := r.tail()
	ks := []string{
		key(tenant, idxStatus, string(r.Status), tail),
		key(tenant, idxSource, string(r.Source), tail),
	}
	if t := r.SourceConfig.DeploymentType; t != nil {
		ks = append(ks, key(tenant, idxType, string(*t), tail))
	}
	if r.ImageVersion != nil {
		ks = append(ks, key(tenant, idxImage, url.QueryEscape(*r.ImageVersion), tail))
	}
	for _, tag := range r.Tags {
		ks = append(ks, key(tenant, idxTag, tag, tail))
	}
	if l := r.SourceConfig.ListenerID; l != nil {
		ks = append(ks, key(tenant, idxListener, *l, tail))
	}
	if id, bop := r.SourceConfig.IntegrationID, r.SourceConfig.BuildOnPush; r.Source == SourceGitHub && id != nil && bop != nil && *bop {
		ks = append(ks, key(tenant, idxPush, *id, tail))
	}
	return ks
}

// putDeployment writes r in its storage form and brings its order and index
// records in line with it; old is the record as stored before (nil when r
// is new).
func (cp *ControlPlane) putDeployment(tx store.Tx, tenant string, old, r *deploymentRecord) error {
	if err := cp.deploymentEvent(tx, tenant, old, r); err != nil { // events.go
		return err
	}
	b, err := cp.secrets.encodeDeployment(tenant, r)
	if err != nil {
		return err
	}
	if err := tx.Put(colDeployments, key(tenant, r.ID), b); err != nil {
		return err
	}
	if old == nil {
		if err := tx.Put(colDeploymentOrder, r.orderKey(tenant), nil); err != nil {
			return err
		}
		if err := addName(tx, tenant, r.orderKey(tenant), r.Name); err != nil {
			return err
		}
	}
	if old == nil || old.summary() != r.summary() {
		if err := tx.Put(colDeploymentSums, r.orderKey(tenant), []byte(r.summary())); err != nil {
			return err
		}
	}
	var oldKeys []string
	if old != nil {
		oldKeys = old.indexKeys(tenant)
	}
	newKeys := r.indexKeys(tenant)
	for _, k := range oldKeys {
		if !slices.Contains(newKeys, k) {
			if err := tx.Delete(colDeploymentIndex, k); err != nil {
				return err
			}
		}
	}
	for _, k := range newKeys {
		if !slices.Contains(oldKeys, k) {
			if err := tx.Put(colDeploymentIndex, k, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeDeployment deletes a deployment and every record that names it:
// its order, summary, index and name records, its name block entry, its
// revisions and its pending work (the tracing project belongs to the
// TracingProjects hook). The lifecycle calls it once a deployment is torn
// down.
func (cp *ControlPlane) removeDeployment(tx store.Tx, tenant string, r *deploymentRecord) error {
	if err := cp.deploymentDeletedEvent(tx, tenant, r); err != nil { // events.go
		return err
	}
	if err := removeName(tx, tenant, r.orderKey(tenant)); err != nil { // before the order record goes
		return err
	}
	for _, k := range []struct{ col, key string }{
		{colDeployments, key(tenant, r.ID)},
		{colDeploymentOrder, r.orderKey(tenant)},
		{colDeploymentSums, r.orderKey(tenant)},
		{colDeploymentNames, key(tenant, r.Name)},
	} {
		if err := tx.Delete(k.col, k.key); err != nil {
			return err
		}
	}
	for _, k := range r.indexKeys(tenant) {
		if err := tx.Delete(colDeploymentIndex, k); err != nil {
			return err
		}
	}
	var revs []string
	prefix := key(tenant, r.ID) + "/"
	err := tx.Scan(colRevisionOrder, prefix, nil, func(k string, _ []byte) (bool, error) {
		revs = append(revs, k)
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, k := range revs {
		_, id, _ := strings.Cut(k[len(prefix):], "/")
		if err := tx.Delete(colRevisionOrder, k); err != nil {
			return err
		}
		if err := tx.Delete(colRevisions, prefix+id); err != nil {
			return err
		}
	}
	return removePending(tx, tenant, r.ID)
}

// removePending deletes the pending work of a deployment: its unfinished
// revisions and its teardown.
func removePending(tx store.Tx, tenant, id string) error {
	ks := []string{deletePendingKey(tenant, id)}
	err := tx.Scan(colPending, pendingRevision+key(tenant, id)+"/", nil, func(k string, _ []byte) (bool, error) {
		ks = append(ks, k)
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, k := range ks {
		if err := tx.Delete(colPending, k); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}

// getRecord reads the JSON record under k in collection col into a new T,
// or returns a *apierr.NotFoundError of kind and id when there is none.
func getRecord[T any](r store.Reader, col, k, kind, id string) (*T, error) {
	b, err := r.Get(col, k)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &apierr.NotFoundError{Kind: kind, ID: id}
	}
	if err != nil {
		return nil, err
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("controlplane: decoding %s %s: %w", strings.ToLower(kind), id, err)
	}
	return &v, nil
}

// getDeployment reads a deployment of the tenant, or a *apierr.NotFoundError.
func (cp *ControlPlane) getDeployment(r store.Reader, tenant, id string) (*deploymentRecord, error) {
	b, err := r.Get(colDeployments, key(tenant, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: id}
	}
	if err != nil {
		return nil, err
	}
	return cp.secrets.decodeDeployment(b, tenant, id)
}

// getDeploymentJSON reads a deployment of the tenant as its wire JSON (what
// json.Marshal of GetDeployment's result gives): the record decoded from its
// storage form and encoded.
func (cp *ControlPlane) getDeploymentJSON(r store.Reader, tenant, id string) ([]byte, error) {
	rec, err := cp.getDeployment(r, tenant, id)
	if err != nil {
		return nil, err
	}
	return json.Marshal(rec.wire())
}

// revisionRecord is a revision as the package works on it: the wire shape
// plus the snapshot fields that are not on the wire. cp_revisions holds it
// in its storage form (encodeRevision).
type revisionRecord struct {
	Revision
	revisionSnapshot
}

// revisionSnapshot is what a stored revision holds beyond its wire shape.
type revisionSnapshot struct {
	DeploymentID   string        `json:"deployment_id"`
	Secrets        []Secret      `json:"secrets"`
	ResourceSpec   *ResourceSpec `json:"resource_spec"`
	InstallCommand *string       `json:"install_command"`
	BuildCommand   *string       `json:"build_command"`
	// ImageVersion is the image the deployer reported; it becomes the
	// deployment's image_version when the revision becomes active.
	ImageVersion *string `json:"image_version,omitempty"`
}

func (cp *ControlPlane) putRevision(tx store.Tx, tenant string, rev *revisionRecord, isNew bool) error {
	if err := cp.revisionEvent(tx, tenant, rev, isNew); err != nil { // events.go
		return err
	}
	b, err := cp.secrets.encodeRevision(tenant, rev)
	if err != nil {
		return err
	}
	k := key(tenant, rev.DeploymentID, rev.ID)
	if isNew {
		err = tx.Create(colRevisions, k, b)
	} else {
		err = tx.Put(colRevisions, k, b)
	}
	if err != nil {
		return err
	}
	return tx.Put(colRevisionOrder, key(tenant, rev.DeploymentID, createdKey(rev.CreatedAt.Time()), rev.ID), []byte(rev.Status))
}

// getRevision reads a revision of the tenant's deployment, or a
// *apierr.NotFoundError.
func (cp *ControlPlane) getRevision(r store.Reader, tenant, deploymentID, id string) (*revisionRecord, error) {
	b, err := r.Get(colRevisions, key(tenant, deploymentID, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, &apierr.NotFoundError{Kind: apierr.KindRevision, ID: id}
	}
	if err != nil {
		return nil, err
	}
	return cp.secrets.decodeRevision(b, tenant, deploymentID, id)
}

// getListener reads a listener of the tenant, or a *apierr.NotFoundError.
func getListener(r store.Reader, tenant, id string) (*Listener, error) {
	return getRecord[Listener](r, colListeners, key(tenant, id), apierr.KindListener, id)
}

// integrationRecord is what cp_integrations holds.
type integrationRecord struct {
	Integration
	CreatedAt time.Time `json:"created_at"`
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// Collections returns the names of the store collections the package
// writes, for tools that back up, copy or inspect a store.
func Collections() []string {
	return []string{colDeployments, colDeploymentOrder, colDeploymentSums, colDeploymentNameBlocks, colDeploymentIndex, colDeploymentNames, colRevisions,
		colRevisionOrder, colListeners, colListenerOrder, colListenerCompute, colIntegrations, colIntegrationInsts,
		colTracingProjects, colPending, colInstallationOwners, colInstallStates, colDeliveries, colEvents}
}
