package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/eventlog"
	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/controlplane/internal/revlog"
	"github.com/deployplane/deployplane/controlplane/internal/tokens"
	"github.com/deployplane/deployplane/controlplane/internal/workqueue"
	"github.com/deployplane/deployplane/store"
)

// Collections and key layout. The collections of deployments, revisions
// and their work use compact binary keys (internal/keyenc): T is the tenant
// prefix, a number of one byte (the first 23 tenants) or a few, assigned
// once per tenant in cp_tenants; D, R, L, I are ids, 17 bytes each for a
// UUID (a tag byte and its 16 bytes; other ids are tagged and length
// prefixed); ts is keyenc.Time(created_at), 8 bytes that sort in time order,
// so reverse scans give newest first (created_at desc, then id desc).
// Parts delimit themselves: there is no separator.
//
//	cp_tenants              "t" tenant -> T;  "p" T -> tenant;  "#" -> last number assigned
//	cp_deployments          T D                    -> storedDeployment JSON (storageform.go)
//	cp_deployment_order     T ts D                 -> "" (unfiltered pages skip these small keys; internal/index)
//	cp_deployment_summaries T ts D                 -> summary (lowercased name, status, type and source codes, image version; internal/index)
//	cp_deployment_pgrams    T gram place ts D      -> "" (the trigram at each place of the lowercased name + "\x00", until folded; internal/index)
//	cp_deployment_pgrams    T gram place 0x00      -> "" (the list has blocks; internal/index)
//	cp_deployment_gram_blocks T gram place first   -> the tails of one trigram's list at one place from first, packed (the sequencer's fold; internal/index)
//	cp_deployment_counts    T n ts[:n]             -> uvarint count of order records in the window (n = 3, 4, 5, 6; internal/index)
//	cp_deployment_count_changes T ts D +|-         -> "" (a change of the counts not yet folded in; internal/index)
//	cp_deployment_index     T field value ts D     -> "" (internal/index; indexTerm: field one byte; value a code, an id or a length-prefixed string)
//	cp_deployment_names     T name                 -> "" (names not yet removed)
//	cp_revisions            T D R                  -> storedRevision JSON (storageform.go)
//	cp_revision_order       T D ts R               -> status
//	cp_tracing_projects     T D                    -> storedTracingProject JSON (StoreTracingProjects; kept after the deployment when its delete asked)
//	cp_pending              "r" T D ts R           -> lease (a revision not terminal; internal/workqueue, worker.go)
//	cp_pending              "d" T D                -> lease (a deployment AWAITING_DELETE)
//	cp_pending              "a" T L "r" D ts R     -> lease (the same, for a deployment an agent serves;
//	cp_pending              "a" T L "d" D          -> lease  L its listener: agentwork.go)
//	cp_revision_logs        T D R b|d [/ seq]      -> a log's meta record, its lines (internal/revlog; seq 8 bytes)
//
// The other collections keep text keys, the tenant's name and "/" first
// (tenants are [A-Za-z0-9._-]{1,64}, so no tenant's prefix is another's),
// ts16 being createdKey: 16 hex digits.
//
//	cp_listeners            tenant/id              -> storedListener JSON (the wire JSON less status, and "deleting"; listeners.go)
//	cp_listener_order       tenant/ts16/id         -> ""
//	cp_listener_compute_ids tenant/escaped compute id -> id
//	cp_listener_tokens      "k" id                 -> the token's record JSON (internal/tokens)
//	cp_listener_tokens      "o" tenant/listener/ts16/id -> ""
//	cp_integrations         tenant/id              -> integrationRecord JSON
//	cp_integration_installs tenant/installation id -> id
//	cp_installation_owners  installation id        -> tenant/integration id (github.go)
//	cp_webhook_deliveries   d/sha256(delivery id), b/sha256(body digest) -> time seen; e/time/key -> ""
//
// Why binary keys: at 100k deployments the keys were two thirds of the
// space (the 36-character tenant opened all 11 keys of a deployment, its
// 36-character id sat in 10, a 16-hex-digit time in 6): the tenant prefix
// takes 1 byte for 37, an id 17 for 36 (37 with its "/"), a time 8 for 17.
// Enum index values (status, type, source) are one byte (indexCodes), and
// a name record's value is empty (its presence is the uniqueness). The
// space per deployment and how it splits are in BENCHMARKS.md ("Space per
// deployment"). A tenant prefix is immutable once assigned, so every
// replica may cache it (keyenc.Tenants, filled only from committed reads); a
// tenant never written has none, and its reads use keyenc.NoTenant, which
// names nothing. Every store accepts any bytes in keys (storepg keeps them
// as bytea).
//
// Beside this layout, the gram records of earlier builds (one per
// trigram, place and deployment, without blocks) are read, version 1
// records, and revision logs under the text keys of earlier builds
// (tenant/deployment/revision/b|d[/seq16], appended to where they are:
// internal/revlog); no other layout is read or converted: CheckLayout
// (layout.go) refuses a store whose deployments have text keys (the
// tenant's name first, a printable byte, where a tenant prefix is
// 0x01-0x1f) or that holds name blocks or unpositioned trigrams of another
// name_contains index, and a record without a format version is refused
// when read (storageform.go).
//
// This is the storage layout, for maintainers (the package doc tells users
// only what they can rely on). It lives here, beside the code that writes
// it, so that a change to one shows in the same diff as the other.
//
// A deployment is one record; next to it, in the same Update, putDeployment
// keeps its name record (uniqueness) and its entry in the name and order
// index (internal/index, which owns those records and walks them): its
// order record (a reverse scan lists newest first, an offset skips small
// keys), its summary under the same key (filters are checked against it
// without decoding the deployment), its index records (status, deployment
// type, source, image version, tag value id, listener, and push for
// github deployments with build_on_push: a push reads one owner record
// and one index prefix), its gram records (name_contains intersects the
// lists of the needle's trigrams) and its place in the order counts (an
// unfiltered page skips its offset over counts of time windows, folded in
// by the sequencer). removeDeployment deletes all of them with the
// revisions and the pending work.
//
// Deployment and revision records are in a storage form, separate from
// the wire form (storageform.go): a JSON object whose first member is the
// format version, {"v":2,...}, with short keys (documented on the fields of
// storedDeployment and storedRevision), no ids (the key holds them: the
// record's own id, and a revision's deployment id), sources and statuses
// as one-character codes (storedEnum), a deployment's revision ids as
// base64 (storedID), timestamps as Unix microseconds (a revision's
// created_at within its id's millisecond, updated_at left out when it is
// created_at, a status_history's after created_at, in one string of
// codes and times (storedHistory), and left out when created_at and
// updated_at answer it), secrets sealed under Options.SecretKey ("sx", the JSON of
// the secret list sealed with AAD controlplane/<kind>/<tenant>/<ids>, the
// text ids "id" or "deployment/id" whatever the key layout;
// "sec" holds them in plain text when there is no key),
// resource_spec beside source_config rather than inside it, and every null,
// empty or zero member left out. A read of a record whose version is newer
// than recordVersion fails with an error wrapping ErrNewerRecord that names
// the record and both versions; a read of a record without "v" fails
// with an error wrapping ErrOldLayout. A change to the storage form that
// older builds would misread bumps recordVersion and keeps decoding the
// earlier versions (version 1: sources, statuses and ids as text,
// updated_at always there). Tracing projects of StoreTracingProjects are
// versioned the same way
// ({"v":2,"n":name,"c":micros}, as in version 1; the key holds tenant and
// deployment id).
// Listeners, integrations and the other records are still their JSON with
// wire names.
// GetDeploymentJSON decodes and encodes a record once: the answer is kept
// beside the stored bytes it came from and served again while the store
// holds those very bytes (internal/answercache; BENCHMARKS.md).
//
// The lifecycle's records follow the work, not the data: cp_pending holds
// one lease per revision not terminal and per deployment AWAITING_DELETE
// (claims scan only these, first in a View, so an idle poll writes
// nothing). cp_webhook_deliveries expires entries by its e/ index: each
// write removes up to 8 entries past DeliveryRetention.
const (
	colDeployments      = "cp_deployments"
	colDeploymentNames  = "cp_deployment_names"
	colAgentLinks       = "cp_agent_links"
	colRevisions        = "cp_revisions"
	colRevisionOrder    = "cp_revision_order"
	colListeners        = "cp_listeners"
	colListenerOrder    = "cp_listener_order"
	colListenerCompute  = "cp_listener_compute_ids"
	colIntegrations     = "cp_integrations"
	colIntegrationInsts = "cp_integration_installs"
	colTracingProjects  = "cp_tracing_projects"
)

// The fields a deployment is indexed by: the first byte of an index term
// (indexTerm), after the tenant prefix in cp_deployment_index.
const (
	idxStatus   = "s"
	idxType     = "y"
	idxSource   = "o"
	idxImage    = "i"
	idxTag      = "t" // the value is an id (keyenc.ID)
	idxListener = "l" // the value is an id (keyenc.ID)
	idxPush     = "p" // github deployments with build_on_push, by integration id (keyenc.ID)
	idxPreview  = "v" // github deployments with source_config.preview, by integration id (keyenc.ID)
	idxAgent    = "a" // deployments linked to an agent, by agent_id
	idxAgentEnv = "b" // the same, by agent_id and environment (agentLinkTerm)
	idxEnv      = "e" // the same, by environment
)

// createdKey encodes t so that byte order is time order, as 16 hex digits:
// the time part of the keys that are still text (listeners, GitHub
// expiry indexes).
func createdKey(t time.Time) string {
	return fmt.Sprintf("%016x", uint64(t.UnixMicro())^(1<<63))
}

// key joins the parts of a text key (the collections not in the compact
// layout: listeners, integrations and GitHub's).
func key(parts ...string) string { return strings.Join(parts, "/") }

// indexCodes are the one-byte codes of the values of the enum-valued
// index fields (status, type, source). Codes are never reused: a new
// value gets a new code, and a value without one is stored as 0x00 and
// keyenc.Str(value).
var indexCodes = map[string]byte{
	string(StatusAwaitingDatabase): 1, string(StatusReady): 2, string(StatusUnused): 3,
	string(StatusAwaitingDelete): 4, string(StatusUnknown): 5,
	string(DeploymentTypeDevFree): 6, string(DeploymentTypeDev): 7, string(DeploymentTypeProd): 8,
	string(SourceGitHub): 9, string(SourceExternalDocker): 10,
	string(SourceInternalSource): 11, string(SourceInternalDocker): 12,
	string(DeploymentTypeDevZero): 13, string(DeploymentTypeDevFreeZero): 14,
}

// indexTerm is the index term (internal/index) of one field value: the
// field, then the value. Id-valued fields encode the value with keyenc.ID,
// enum-valued ones with indexCodes, image versions with keyenc.Str; each
// delimits itself, so no term is a prefix of another.
func indexTerm(field, value string) string {
	switch field {
	case idxTag, idxListener, idxPush, idxPreview:
		return field + keyenc.ID(value)
	case idxStatus, idxType, idxSource:
		if c, ok := indexCodes[value]; ok {
			return field + string([]byte{c})
		}
		return field + "\x00" + keyenc.Str(value)
	}
	return field + keyenc.Str(value)
}

// agentLinkTerm is the index term of an agent and one of its environments.
func agentLinkTerm(agentID string, env AgentEnvironment) string {
	return idxAgentEnv + keyenc.Str(agentID) + keyenc.Str(string(env))
}

// agentLinkKey is the key of the cp_agent_links record that holds an
// agent's environment for one deployment (its value is the deployment's
// id): at most one per agent and environment.
func agentLinkKey(tp string, a *DeploymentAgent) string {
	return tp + keyenc.Str(a.AgentID) + keyenc.Str(string(a.Environment))
}

// deploymentKey is the key of a deployment record, and of its name
// record's value and tracing project: tp + keyenc.ID(id).
func deploymentKey(tp, id string) string {
	var b [64]byte // a tenant prefix and a UUID's part fit: the string is the one allocation
	return string(keyenc.AppendID(append(b[:0], tp...), id))
}

// revisionKey is the key of a revision record.
func revisionKey(tp, deploymentID, id string) string {
	return tp + keyenc.ID(deploymentID) + keyenc.ID(id)
}

// readTenant returns the tenant's prefix, keyenc.NoTenant when it has
// none; r may be a View's or an Update's (what a View read is cached).
func (cp *ControlPlane) readTenant(r store.Reader, tenant string) (string, error) {
	return cp.tenants.Prefix(r, tenant)
}

// writeTenant returns the tenant's prefix, assigning one in tx when it
// has none.
func (cp *ControlPlane) writeTenant(tx store.Tx, tenant string) (string, error) {
	return assignTenant(&cp.tenants, tx, tenant)
}

// assignTenant is c.Assign (c nil: no cache) with the prefixes tx's
// Update has read or assigned, when tx is an eventStore's: it reads a
// tenant's prefix once, and the ControlPlane caches them once it has
// committed.
func assignTenant(c *keyenc.Tenants, tx store.Tx, tenant string) (string, error) {
	var p *keyenc.Pending
	if et, ok := tx.(*eventTx); ok {
		p = &et.tenants
	}
	return c.Assign(tx, p, tenant)
}

// tailID returns the id of an order tail (keyenc.Time + keyenc.ID(id)).
func tailID(tail string) string {
	id, _, _ := keyenc.ParseID(tail[min(len(tail), keyenc.TimeLen):])
	return id
}

// deploymentRecord is a deployment as the package works on it: the wire
// shape plus the fields that are not on the wire. cp_deployments holds it
// in its storage form (encodeDeployment); its own JSON encoding serves
// only to compare two records (equal).
type deploymentRecord struct {
	Deployment
	Tags []string `json:"tag_value_ids"`
	// KeepTracingProject: the DELETE that made the deployment
	// AWAITING_DELETE said delete_tracing_project=false (deletes.go).
	KeepTracingProject bool `json:"keep_tracing_project,omitempty"`
}

// tail is the deployment's place in the newest-first order: keyenc.Time +
// keyenc.ID(id).
func (r *deploymentRecord) tail() string { return keyenc.Time(r.CreatedAt.Time()) + keyenc.ID(r.ID) }

// serveAt records that a deployer serves the deployment's active revision
// at addr: its url becomes addr (servedURL), and the custom_url of a
// source whose custom_url comes from its deployer (customURLFromDeployer)
// becomes addr too.
func (r *deploymentRecord) serveAt(addr string) {
	if customURLFromDeployer(r.Source) {
		r.SourceConfig.CustomURL = new(addr)
	}
	r.URL = new(r.servedURL(addr))
}

// servedURL is the deployment's url once a deployer serves it at addr:
// its custom_url when it has one (an address the operator put in front of
// the deployer's, wire contract section 10), else addr.
func (r *deploymentRecord) servedURL(addr string) string {
	if cu := r.SourceConfig.CustomURL; cu != nil && *cu != "" {
		return *cu
	}
	return addr
}

// summary is the value of the deployment's summary record: what the list
// filters other than tags and ids look at, in a form that decodes without
// allocation. It begins with the lowercased name (as the index requires);
// the status, deployment type and source follow, each its one-byte code
// of indexCodes (summaryCode; summaries written before the codes hold the
// text, which summaryText reads as well), and the image version comes
// last so that it may hold any byte.
func (r *deploymentRecord) summary() string {
	var t, img string
	if r.SourceConfig.DeploymentType != nil {
		t = string(*r.SourceConfig.DeploymentType)
	}
	if r.ImageVersion != nil {
		img = "=" + *r.ImageVersion // "=" marks a non-null version
	}
	return strings.ToLower(r.Name) + "\x00" + summaryCode(string(r.Status)) + "\x00" + summaryCode(t) + "\x00" +
		summaryCode(string(r.Source)) + "\x00" + img
}

// summaryCode is an enum value as a summary holds it: its one-byte code
// (indexCodes), or the value itself when it has none.
func summaryCode(v string) string {
	if c, ok := indexCodes[v]; ok {
		return string([]byte{c})
	}
	return v
}

// codeValues maps each code of indexCodes back to its value.
var codeValues = func() (m [256]string) {
	for v, c := range indexCodes {
		m[c] = v
	}
	return m
}()

// summaryText is the value of an enum field of a summary (summaryCode):
// a code's value, else the text itself (no value is one byte below 0x20).
func summaryText(f string) string {
	if len(f) == 1 && f[0] < 0x20 {
		return codeValues[f[0]]
	}
	return f
}

// remote is the deployment's remote_reconciled: it is external_docker,
// reconciled where its image is pushed from (wire contract section 5).
// Those an agent serves (section 11, RemoteReconciled as stored) are
// external_docker too, the one source placed on listeners; the list filter
// therefore walks the source's index term.
func (r *deploymentRecord) remote() bool {
	return r.Source == SourceExternalDocker || r.RemoteReconciled
}

// indexTerms lists the index terms r is found by.
func (r *deploymentRecord) indexTerms() []string {
	ts := []string{
		indexTerm(idxStatus, string(r.Status)),
		indexTerm(idxSource, string(r.Source)),
	}
	if t := r.SourceConfig.DeploymentType; t != nil {
		ts = append(ts, indexTerm(idxType, string(*t)))
	}
	if r.ImageVersion != nil {
		ts = append(ts, indexTerm(idxImage, *r.ImageVersion))
	}
	for _, tag := range r.Tags {
		ts = append(ts, indexTerm(idxTag, tag))
	}
	if l := r.SourceConfig.ListenerID; l != nil {
		ts = append(ts, indexTerm(idxListener, *l))
	}
	if id, bop := r.SourceConfig.IntegrationID, r.SourceConfig.BuildOnPush; r.Source == SourceGitHub && id != nil && bop != nil && *bop {
		ts = append(ts, indexTerm(idxPush, *id))
	}
	if id := r.SourceConfig.IntegrationID; r.Source == SourceGitHub && id != nil && r.SourceConfig.Preview != nil {
		ts = append(ts, indexTerm(idxPreview, *id))
	}
	if a := r.Agent; a != nil {
		ts = append(ts, indexTerm(idxAgent, a.AgentID), agentLinkTerm(a.AgentID, a.Environment), indexTerm(idxEnv, string(a.Environment)))
	}
	return ts
}

// entry is what the name and order index holds of r.
func (r *deploymentRecord) entry() *index.Entry {
	return &index.Entry{Tail: r.tail(), Name: r.Name, Summary: r.summary(), Terms: r.indexTerms()}
}

// writeFunc writes a record: a Tx's Put, or a store.Insert (writer).
type writeFunc func(collection, key string, value []byte) error

// writer returns how tx writes a record: with store.Insert when fresh
// (the key holds an id made for the record, which no record has), else
// with Put.
func writer(tx store.Tx, fresh bool) writeFunc {
	if !fresh {
		return tx.Put
	}
	return func(collection, key string, value []byte) error { return store.Insert(tx, collection, key, value) }
}

// putDeployment writes r in its storage form and brings its index entry
// (internal/index) in line with it; old is the record as stored before
// (nil when r is new).
func (cp *ControlPlane) putDeployment(tx store.Tx, tenant string, old, r *deploymentRecord) error {
	b, err := cp.secrets.encodeDeployment(tenant, r)
	if err != nil {
		return err
	}
	if err := cp.deploymentEvent(tx, tenant, old, r, b); err != nil { // events.go
		return err
	}
	tp, err := cp.writeTenant(tx, tenant)
	if err != nil {
		return err
	}
	// A new deployment's records have keys that hold its new id, which no
	// record has: they are Inserts (store.Insert), which cost PostgreSQL
	// less than Puts, and its changes' records are Puts.
	if err := writer(tx, old == nil)(colDeployments, deploymentKey(tp, r.ID), b); err != nil {
		return err
	}
	if err := putAgentLink(tx, tp, old, r); err != nil {
		return err
	}
	var was *index.Entry
	if old != nil {
		was = old.entry()
	}
	return index.Put(tx, tp, was, r.entry())
}

// putAgentLink moves the deployment's agent record when its agent changed
// from old's: a conflict (apierr.ErrConflict) when another deployment
// holds the agent's environment. The stores' Updates are serializable, so
// the Get and the Put hold the environment for one deployment at most. A
// new deployment's (old nil) is checked by CreateDeployment before its
// name's Insert, which a Get here would send (storepg holds Inserts back
// until the next statement), and its refusal could not be told from the
// name's.
func putAgentLink(tx store.Tx, tp string, old, r *deploymentRecord) error {
	var was *DeploymentAgent
	if old != nil {
		was = old.Agent
	}
	if reflect.DeepEqual(was, r.Agent) {
		return nil
	}
	if was != nil {
		if err := tx.Delete(colAgentLinks, agentLinkKey(tp, was)); err != nil {
			return err
		}
	}
	if r.Agent == nil {
		return nil
	}
	if old != nil {
		if err := agentLinkFree(tx, tp, r.Agent, r.ID); err != nil {
			return err
		}
	}
	return tx.Put(colAgentLinks, agentLinkKey(tp, r.Agent), []byte(r.ID))
}

// agentLinkFree returns a conflict (apierr.ErrConflict) when a deployment
// other than id holds agent a's environment.
func agentLinkFree(r store.Reader, tp string, a *DeploymentAgent, id string) error {
	switch holder, err := r.Get(colAgentLinks, agentLinkKey(tp, a)); {
	case err == nil && string(holder) != id:
		return apierr.Conflictf("Agent %s already has a deployment in environment '%s'.", a.AgentID, a.Environment)
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return err
	}
	return nil
}

// removeDeployment deletes a deployment and every record that names it:
// its index entry (order, summary, index and gram records, its place in
// the order counts), its name record, its revisions and its pending work
// (the tracing project belongs to the TracingProjects hook). The
// lifecycle calls it once a deployment is torn down.
func (cp *ControlPlane) removeDeployment(tx store.Tx, tenant string, r *deploymentRecord) error {
	if err := cp.deploymentDeletedEvent(tx, tenant, r); err != nil { // events.go
		return err
	}
	tp, err := cp.readTenant(tx, tenant)
	if err != nil {
		return err
	}
	if err := index.Remove(tx, tp, r.entry()); err != nil {
		return err
	}
	keys := []struct{ col, key string }{
		{colDeployments, deploymentKey(tp, r.ID)},
		{colDeploymentNames, tp + r.Name},
	}
	if r.Agent != nil {
		keys = append(keys, struct{ col, key string }{colAgentLinks, agentLinkKey(tp, r.Agent)})
	}
	for _, k := range keys {
		if err := tx.Delete(k.col, k.key); err != nil {
			return err
		}
	}
	var revs []string
	prefix := deploymentKey(tp, r.ID)
	err = tx.Scan(colRevisionOrder, prefix, nil, func(k string, _ []byte) (bool, error) {
		revs = append(revs, k)
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, k := range revs {
		if err := tx.Delete(colRevisionOrder, k); err != nil {
			return err
		}
		if err := tx.Delete(colRevisions, prefix+k[len(prefix)+8:]); err != nil {
			return err
		}
	}
	if err := revlog.DeleteDeployment(tx, tenant, tp, r.ID); err != nil {
		return err
	}
	return removePending(tx, tp, r)
}

// removePending deletes the pending work of a deployment, in every range
// that may hold it (rangesOf): its unfinished revisions and its teardown.
// tp is the tenant prefix.
func removePending(tx store.Tx, tp string, r *deploymentRecord) error {
	for _, rg := range rangesOf(tp, r.SourceConfig.ListenerID) {
		if err := workqueue.RemoveDeployment(tx, rg, keyenc.ID(r.ID)); err != nil {
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
	b, err := cp.storedDeployment(r, tenant, id)
	if err != nil {
		return nil, err
	}
	return cp.secrets.decodeDeployment(b, tenant, id)
}

// storedDeployment reads the stored record of a deployment of the tenant,
// as the store holds it (valid during r's transaction only).
func (cp *ControlPlane) storedDeployment(r store.Reader, tenant, id string) ([]byte, error) {
	return cp.storedDeploymentIn(r, tenant, "", id)
}

// storedDeploymentIn is storedDeployment with the tenant's prefix tp
// when the caller knows it ("": read it).
func (cp *ControlPlane) storedDeploymentIn(r store.Reader, tenant, tp, id string) ([]byte, error) {
	if tp == "" {
		var err error
		if tp, err = cp.readTenant(r, tenant); err != nil {
			return nil, err
		}
	}
	b, err := r.Get(colDeployments, deploymentKey(tp, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: id}
	}
	return b, err
}

// appendDeploymentJSON appends to dst a deployment of the tenant as its
// wire JSON (what json.Marshal of GetDeployment's result gives): the
// answer cp.answers kept for the very record stored, or the record decoded
// from its storage form and encoded. The answer is a function of the
// record's bytes, its tenant and id (and of the secret key, fixed per
// ControlPlane), as internal/answercache needs, and every write of a
// deployment (a PATCH, a new revision, a status change, a redeploy, its
// removal) rewrites or deletes its record. The answers hold secret values
// in plain text, in this process's memory only, bounded by
// Options.AnswerCacheBytes.
func (cp *ControlPlane) appendDeploymentJSON(r store.Reader, dst []byte, tenant, tp, id string) ([]byte, error) {
	b, err := cp.storedDeploymentIn(r, tenant, tp, id)
	if err != nil {
		if errors.As(err, new(*apierr.NotFoundError)) {
			cp.answers.Drop(id)
		}
		return dst, err
	}
	if a := cp.answers.Get(tenant, id, b); a != nil {
		return append(dst, a...), nil
	}
	rec, err := cp.secrets.decodeDeployment(b, tenant, id)
	if err != nil {
		return dst, err
	}
	a, err := json.Marshal(rec.wire())
	if err != nil {
		return dst, err
	}
	cp.answers.Put(tenant, id, b, a)
	return append(dst, a...), nil
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
	DeploymentID     string            `json:"deployment_id"`
	Secrets          []Secret          `json:"secrets"`
	SecretReferences []SecretReference `json:"secret_references,omitempty"`
	ResourceSpec     *ResourceSpec     `json:"resource_spec"`
	InstallCommand   *string           `json:"install_command"`
	BuildCommand     *string           `json:"build_command"`
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
	tp, err := cp.writeTenant(tx, tenant)
	if err != nil {
		return err
	}
	// A new revision's keys hold its new id (newID), which no record has:
	// Inserts (store.Insert), which cost no round trip of their own in
	// storepg, where a Create waits for its answer, and spare PostgreSQL
	// the search an upsert makes.
	write := writer(tx, isNew)
	if err := write(colRevisions, revisionKey(tp, rev.DeploymentID, rev.ID), b); err != nil {
		return err
	}
	return write(colRevisionOrder, deploymentKey(tp, rev.DeploymentID)+keyenc.Time(rev.CreatedAt.Time())+keyenc.ID(rev.ID), []byte(rev.Status))
}

// getDeploymentRevision reads the tenant's deployment did and its
// revision revisionID, a path id checked here: a deployment not found is
// answered first, so that another tenant's deployment is a deployment
// 404 whatever the revision id, and then a revision id that is none, or
// not the deployment's, is a revision 404.
func (cp *ControlPlane) getDeploymentRevision(r store.Reader, tenant, did, revisionID string) (*deploymentRecord, *revisionRecord, error) {
	dep, err := cp.getDeployment(r, tenant, did)
	if err != nil {
		return nil, nil, err
	}
	rid, ok := pathID(revisionID)
	if !ok {
		return nil, nil, &apierr.NotFoundError{Kind: apierr.KindRevision, ID: revisionID}
	}
	rev, err := cp.getRevision(r, tenant, did, rid)
	if err != nil {
		return nil, nil, err
	}
	return dep, rev, nil
}

// getRevision reads a revision of the tenant's deployment, or a
// *apierr.NotFoundError.
func (cp *ControlPlane) getRevision(r store.Reader, tenant, deploymentID, id string) (*revisionRecord, error) {
	tp, err := cp.readTenant(r, tenant)
	if err != nil {
		return nil, err
	}
	b, err := r.Get(colRevisions, revisionKey(tp, deploymentID, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, &apierr.NotFoundError{Kind: apierr.KindRevision, ID: id}
	}
	if err != nil {
		return nil, err
	}
	return cp.secrets.decodeRevision(b, tenant, deploymentID, id)
}

// getListener reads a listener of the tenant, or a *apierr.NotFoundError.
// Its Status is not set (answerListener sets it).
func getListener(r store.Reader, tenant, id string) (*Listener, error) {
	s, err := getRecord[storedListener](r, colListeners, key(tenant, id), apierr.KindListener, id)
	if err != nil {
		return nil, err
	}
	return s.listener(), nil
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
	return []string{keyenc.ColTenants, colDeployments, index.ColOrder, index.ColSummaries, index.ColGrams, index.ColGramBlocks, index.ColCounts, index.ColCountChanges, index.ColTerms, colDeploymentNames, colAgentLinks, colRevisions,
		colRevisionOrder, colListeners, colListenerOrder, colListenerCompute, tokens.Collection, colIntegrations, colIntegrationInsts,
		colTracingProjects, workqueue.Collection, colInstallationOwners, colDeliveries, revlog.Collection, eventlog.Events, eventlog.Outbox, eventlog.Clocks,
		eventlog.Lease}
}
