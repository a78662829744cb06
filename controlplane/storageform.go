package controlplane

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/google/uuid"

	"github.com/deployplane/deployplane/internal/seal"
	"github.com/deployplane/deployplane/wiretime"
)

// recordVersion is the storage format version this build writes in every
// deployment and revision record (the "v" member, always first). A record
// without one is of another layout and is refused (ErrOldLayout). See the layout comment in records.go.
// Version 2 writes sources and statuses as their codes (storedEnum),
// revision ids as their bytes in base64 (storedID), a revision's
// created_at within its id's millisecond (storedCreated), the times of a status_history
// after created_at, and leaves out an updated_at equal to created_at;
// this build reads both.
const recordVersion = 2

// storedEnum is a source, a deployment status or a revision status as the
// storage form keeps it: from version 2, its one-character code
// (enumCodes), or the value itself when it has none; version 1 records
// hold the value, which reads as well (no value is one character long).
type storedEnum string

// enumCodes are the codes of storedEnum. A code is never reused: a new
// value gets a new code, or none.
var enumCodes = map[string]string{
	string(SourceGitHub): "g", string(SourceExternalDocker): "e", string(SourceInternalSource): "s", string(SourceInternalDocker): "d",
	string(StatusAwaitingDatabase): "A", string(StatusReady): "R", string(StatusUnused): "N", string(StatusAwaitingDelete): "X",
	string(StatusUnknown):    "U",
	string(RevisionCreating): "C", string(RevisionQueued): "Q", string(RevisionAwaitingBuild): "W", string(RevisionBuilding): "B",
	string(RevisionAwaitingDeploy): "V", string(RevisionDeploying): "P", string(RevisionCreateFailed): "1",
	string(RevisionBuildFailed): "2", string(RevisionDeployFailed): "3", string(RevisionDeployed): "D",
	string(RevisionSkipped): "S", string(RevisionInterrupted): "I",
}

// enumValues maps each code of enumCodes back to its value.
var enumValues = func() map[string]string {
	m := make(map[string]string, len(enumCodes))
	for v, c := range enumCodes {
		m[c] = v
	}
	return m
}()

// MarshalText writes e's code, or e when it has none.
func (e storedEnum) MarshalText() ([]byte, error) {
	if c, ok := enumCodes[string(e)]; ok {
		return []byte(c), nil
	}
	return []byte(e), nil
}

// UnmarshalText reads a code, or a value (version 1, or a value without
// a code).
func (e *storedEnum) UnmarshalText(b []byte) error {
	if v, ok := enumValues[string(b)]; ok {
		*e = storedEnum(v)
		return nil
	}
	*e = storedEnum(b)
	return nil
}

// storedID is a revision id as the storage form keeps it: from version 2,
// a UUID (every id NewID makes is one) as the unpadded URL-safe base64 of
// its 16 bytes, 22 characters; version 1 records hold the 36 characters
// of its text, which read as well, as does an id that is no UUID.
type storedID string

// MarshalText writes a UUID's 16 bytes in base64, another id as it is.
func (id storedID) MarshalText() ([]byte, error) {
	if u, err := uuid.Parse(string(id)); err == nil && len(id) == 36 && u.String() == string(id) {
		return base64.RawURLEncoding.AppendEncode(nil, u[:]), nil
	}
	return []byte(id), nil
}

// UnmarshalText reads a UUID's 22 characters of base64, or an id's text.
func (id *storedID) UnmarshalText(b []byte) error {
	if len(b) == 22 {
		var u uuid.UUID
		if n, err := base64.RawURLEncoding.Decode(u[:], b); err == nil && n == 16 {
			*id = storedID(u.String())
			return nil
		}
	}
	*id = storedID(b)
	return nil
}

// storedCreated is created_at (Unix microseconds c) of the revision
// record of id as the storage form keeps it: from version 2, when id is a
// UUID whose first 48 bits are the millisecond of c (a version 7 UUID
// made then, as NewID's are), only the microseconds within that
// millisecond ("cr", with "c" left out); else c ("c"). createdOf reads it
// back. A deployment record keeps "c": measured at 100k, its 13 bytes
// fewer packed 11 new records in a page where 10 were, and once deployed
// (a longer record: updated_at, the active revision, the image) their
// pages split to half full, 320 bytes a deployment more
// (BenchmarkSpaceDeployed).
func storedCreated(id string, c int64) (int64, *int64) {
	if ms, ok := uuidMillis(id); ok && c >= 0 && c/1000 == ms {
		in := c % 1000
		return 0, &in
	}
	return c, nil
}

// createdOf is the created_at of the record of id stored with c and in
// (storedCreated).
func createdOf(id string, c int64, in *int64) (int64, error) {
	if in == nil {
		return c, nil
	}
	ms, ok := uuidMillis(id)
	if !ok || *in < 0 || *in >= 1000 {
		return 0, errors.New("a created_at within the millisecond of an id that is no UUID")
	}
	return ms*1000 + *in, nil
}

// uuidMillis returns the first 48 bits of the UUID id: a version 7
// UUID's Unix milliseconds.
func uuidMillis(id string) (int64, bool) {
	if len(id) != 36 {
		return 0, false
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return 0, false
	}
	return int64(u[0])<<40 | int64(u[1])<<32 | int64(u[2])<<24 | int64(u[3])<<16 | int64(u[4])<<8 | int64(u[5]), true
}

// storedUpdated is updated_at as the storage form keeps it: left out
// (0) when it equals created_at; updatedOf reads it back.
func storedUpdated(created, updated int64) int64 {
	if updated == created {
		return 0
	}
	return updated
}

// updatedOf is the updated_at of a record stored with created and
// updated (storedUpdated).
func updatedOf(created, updated int64) int64 {
	if updated == 0 {
		return created
	}
	return updated
}

// ErrNewerRecord is wrapped by the error of any read that meets a record
// whose storage format version is newer than this build understands: a
// newer build wrote the store, and this one must not misread it. Upgrade
// the binary (or restore a backup made for this version).
var ErrNewerRecord = errors.New("controlplane: record written in a newer storage format")

// recordVersionOf returns the format version of a stored record: the number
// after a leading {"v":, 0 when it has none, or -1 when the number is
// malformed.
func recordVersionOf(b []byte) int {
	const prefix = `{"v":`
	if !bytes.HasPrefix(b, []byte(prefix)) {
		return 0
	}
	rest := b[len(prefix):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	v, err := strconv.Atoi(string(rest[:n]))
	if err != nil {
		return -1
	}
	return v
}

// checkRecordVersion answers the error for a record this build does not
// read: one without a format version (ErrOldLayout), or one newer than
// this build (ErrNewerRecord).
func checkRecordVersion(b []byte, kind, id string) error {
	switch v := recordVersionOf(b); {
	case v == 0:
		return fmt.Errorf("controlplane: %s %s is stored without a format version: %w", kind, id, ErrOldLayout)
	case v < 0 || v > recordVersion:
		return fmt.Errorf("controlplane: %s %s is stored in format version %d, this build reads up to version %d: %w",
			kind, id, v, recordVersion, ErrNewerRecord)
	}
	return nil
}

// micros and fromMicros store timestamps as Unix microseconds.
func micros(t wiretime.Time) int64 { return t.Time().UnixMicro() }

func fromMicros(us int64) wiretime.Time { return wiretime.New(time.UnixMicro(us).UTC()) }

// storedDeployment is the storage form (version 1) of a deployment record.
// Keys are short and null, empty and zero members are left out; what each
// key holds is the field it tags. resource_spec moves out of source_config
// to "rs" (storedResourceSpec, the wire names without its nulls). Between
// the name and the source come the members of the rows that name their own
// key (fieldRule.stored; rowMembers): "dn" is display_name.
type storedDeployment struct {
	V       int                  `json:"v"`
	ID      string               `json:"-"` // the record's key holds it
	Name    string               `json:"n"`
	Source  storedEnum           `json:"s"`
	Config  storedSourceConfig   `json:"sc,omitzero"`
	Spec    *storedResourceSpec  `json:"rs,omitzero"`
	Rev     storedRevisionConfig `json:"rc,omitzero"`
	Secrets []Secret             `json:"sec,omitempty"` // without Options.SecretKey only
	Sealed  []byte               `json:"sx,omitzero"`   // the secrets' JSON, sealed (secretsAAD)
	Created int64                `json:"c"`
	Updated int64                `json:"u,omitzero"` // storedUpdated
	Status  storedEnum           `json:"st"`
	Latest  *storedID            `json:"lr,omitzero"`
	Active  *storedID            `json:"ar,omitzero"`
	Image   *string              `json:"iv,omitzero"`
	URL     *string              `json:"url,omitzero"`
	Tags    []string             `json:"t,omitzero"`
	// Remote is remote_reconciled (added to version 1 without a bump:
	// older builds ignore it and answer false).
	Remote bool `json:"rr,omitzero"`
	// Message is status_message; KeepTP says that the DELETE asked to keep
	// the tracing project (deletes.go). Added to version 1 without a bump,
	// as storedRevision's History: older builds ignore them.
	Message *string `json:"msg,omitzero"`
	KeepTP  bool    `json:"ktp,omitzero"`
}

// rowMember is a row stored by a member of its own (fieldRule.stored): the
// member's key and the field's index in Deployment.
type rowMember struct {
	key   string
	field int
}

// rowMembers are the rows stored by a member of their own, in the order of
// the rules table: a stored deployment holds each as the field's JSON, left
// out when null, right after the name. Only a top-level field has one; a
// row that names a key for another is a mistake this refuses at once.
var rowMembers = func() []rowMember {
	var out []rowMember
	for _, r := range rules {
		if r.stored == "" {
			continue
		}
		f, ok := jsonField(reflect.TypeFor[Deployment](), r.loc[0])
		if len(r.loc) != 1 || !ok {
			panic("controlplane: the rules table's row " + strings.Join(r.loc, ".") + " names a stored key but is not a field of Deployment")
		}
		out = append(out, rowMember{key: r.stored, field: f.Index[0]})
	}
	return out
}()

// insertRowMembers puts the members of rowMembers that d has into b, the
// storage form of d as storedDeployment gives it, after the name.
func insertRowMembers(b []byte, d *Deployment) ([]byte, error) {
	dv := reflect.ValueOf(d).Elem()
	var members []byte
	for _, m := range rowMembers {
		f := dv.Field(m.field)
		if f.IsZero() {
			continue
		}
		v, err := json.Marshal(f.Interface())
		if err != nil {
			return nil, err
		}
		members = append(append(append(append(members, `,"`...), m.key...), `":`...), v...)
	}
	if members == nil {
		return b, nil
	}
	at := nameEnd(b)
	if at < 0 {
		return nil, errors.New("controlplane: encoding a deployment: its record does not start with the version and the name")
	}
	return slices.Insert(b, at, members...), nil
}

// nameEnd is the offset just past the name's value in b, a stored
// deployment record ({"v":1,"n":"...",...}), or -1 when b does not start
// so.
func nameEnd(b []byte) int {
	const v, n = `{"v":`, `,"n":`
	if !bytes.HasPrefix(b, []byte(v)) {
		return -1
	}
	i := len(v)
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if !bytes.HasPrefix(b[i:], []byte(n+`"`)) {
		return -1
	}
	return valueEnd(b, i+len(n))
}

// valueEnd is the offset just past the JSON value that starts at b[i], in
// b, valid compact JSON (a stored record, which decoding has parsed
// whole before).
func valueEnd(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth <= 0 {
				return i + 1 + depth // past the value's end, or at the end of what holds it
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// readRowMembers sets the fields of d that b, a stored deployment record
// that decoding has parsed whole, holds in members of rowMembers: those
// between the name and the source. A key there that is no row's (a newer
// build's) is skipped.
func readRowMembers(b []byte, d *Deployment) error {
	dv := reflect.ValueOf(d).Elem()
	for i := nameEnd(b); i > 0 && i < len(b) && b[i] == ','; {
		k := valueEnd(b, i+1) // past the key, a string, at the ':'
		key := b[i+2 : k-1]
		if string(key) == "s" {
			break // the source: no more row members
		}
		v := valueEnd(b, k+1)
		if m := slices.IndexFunc(rowMembers, func(m rowMember) bool { return m.key == string(key) }); m >= 0 {
			if err := jsonv2.Unmarshal(b[k+1:v], dv.Field(rowMembers[m].field).Addr().Interface()); err != nil {
				return err
			}
		}
		i = v
	}
	return nil
}

// storedSourceConfig is SourceConfig without its nulls (a conversion of
// it: the fields must stay the same, the tags differ).
type storedSourceConfig struct {
	IntegrationID  *string         `json:"int,omitzero"`
	RepoURL        *string         `json:"repo,omitzero"`
	DeploymentType *DeploymentType `json:"dt,omitzero"`
	BuildOnPush    *bool           `json:"bop,omitzero"`
	CustomURL      *string         `json:"url,omitzero"`
	ResourceSpec   *ResourceSpec   `json:"-"` // stored as storedDeployment.Spec
	ListenerID     *string         `json:"lis,omitzero"`
	ListenerConfig *ListenerConfig `json:"lc,omitzero"`
	InstallCommand *string         `json:"ic,omitzero"`
	BuildCommand   *string         `json:"bc,omitzero"`
	AutoRollback   *bool           `json:"ar,omitzero"`
	Preview        *PreviewConfig  `json:"pre,omitzero"`
}

// storedRevisionConfig is SourceRevisionConfig without its nulls.
type storedRevisionConfig struct {
	RepoRef             *string `json:"ref,omitzero"`
	GraphConfigPath     *string `json:"gcp,omitzero"`
	LanggraphConfigPath *string `json:"lgcp,omitzero"` // answers only: never stored
	ImageURI            *string `json:"img,omitzero"`
	SourceTarballPath   *string `json:"tar,omitzero"`
	RepoCommitSHA       *string `json:"sha,omitzero"`
}

// storedResourceSpec is ResourceSpec without its nulls, under the wire
// names (a conversion of it: the fields must stay the same).
type storedResourceSpec struct {
	MinScale      *int64   `json:"min_scale,omitzero"`
	MaxScale      *int64   `json:"max_scale,omitzero"`
	CPU           *float64 `json:"cpu,omitzero"`
	CPULimit      *float64 `json:"cpu_limit,omitzero"`
	MemoryMB      *int64   `json:"memory_mb,omitzero"`
	MemoryLimitMB *int64   `json:"memory_limit_mb,omitzero"`

	QueueMinScale      *int64   `json:"queue_min_scale,omitzero"`
	QueueMaxScale      *int64   `json:"queue_max_scale,omitzero"`
	QueueCPU           *float64 `json:"queue_cpu,omitzero"`
	QueueCPULimit      *float64 `json:"queue_cpu_limit,omitzero"`
	QueueMemoryMB      *int64   `json:"queue_memory_mb,omitzero"`
	QueueMemoryLimitMB *int64   `json:"queue_memory_limit_mb,omitzero"`

	OrchestratorCPU           *float64 `json:"orchestrator_cpu,omitzero"`
	OrchestratorCPULimit      *float64 `json:"orchestrator_cpu_limit,omitzero"`
	OrchestratorMemoryMB      *int64   `json:"orchestrator_memory_mb,omitzero"`
	OrchestratorMemoryLimitMB *int64   `json:"orchestrator_memory_limit_mb,omitzero"`
	OrchestratorMinScale      *int64   `json:"orchestrator_min_scale,omitzero"`
	OrchestratorMaxScale      *int64   `json:"orchestrator_max_scale,omitzero"`
	ExecutorCPU               *float64 `json:"executor_cpu,omitzero"`
	ExecutorCPULimit          *float64 `json:"executor_cpu_limit,omitzero"`
	ExecutorMemoryMB          *int64   `json:"executor_memory_mb,omitzero"`
	ExecutorMemoryLimitMB     *int64   `json:"executor_memory_limit_mb,omitzero"`

	RedisMemoryMB *int64 `json:"redis_memory_mb,omitzero"`

	Labels             map[string]string      `json:"labels,omitzero"`
	Annotations        map[string]string      `json:"annotations,omitzero"`
	ServiceAccountName *string                `json:"service_account_name,omitzero"`
	ImagePullSecrets   []LocalObjectReference `json:"image_pull_secrets,omitzero"`
	Volumes            []Volume               `json:"volumes,omitzero"`
	VolumeMounts       []VolumeMount          `json:"volume_mounts,omitzero"`
	InitContainers     []Container            `json:"init_containers,omitzero"`
	Sidecars           []Container            `json:"sidecars,omitzero"`

	DBCPU            *float64 `json:"db_cpu,omitzero"`
	DBCPULimit       *float64 `json:"db_cpu_limit,omitzero"`
	DBMemoryMB       *int64   `json:"db_memory_mb,omitzero"`
	DBMemoryLimitMB  *int64   `json:"db_memory_limit_mb,omitzero"`
	DBStorageGi      *int64   `json:"db_storage_gi,omitzero"`
	DBMaxConnections *int64   `json:"db_max_connections,omitzero"`
}

// storedRevision is the storage form (version 1) of a revision record.
type storedRevision struct {
	V              int                  `json:"v"`
	ID             string               `json:"-"`           // the record's key holds it
	DeploymentID   string               `json:"-"`           // and this`
	Created        int64                `json:"c,omitzero"`  // storedCreated
	CreatedIn      *int64               `json:"cr,omitzero"` // storedCreated
	Updated        int64                `json:"u,omitzero"`  // storedUpdated
	Status         storedEnum           `json:"st"`
	Source         storedEnum           `json:"s"`
	Rev            storedRevisionConfig `json:"rc,omitzero"`
	Message        *string              `json:"msg,omitzero"`
	Secrets        []Secret             `json:"sec,omitempty"` // without Options.SecretKey only
	Sealed         []byte               `json:"sx,omitzero"`   // the secrets' JSON, sealed (secretsAAD)
	Spec           *storedResourceSpec  `json:"rs,omitzero"`
	InstallCommand *string              `json:"ic,omitzero"`
	BuildCommand   *string              `json:"bc,omitzero"`
	ImageVersion   *string              `json:"iv,omitzero"`
	// Tracked is tracked_packages (added to version 1 without a bump, as
	// History: older builds ignore it).
	Tracked []string `json:"tp,omitzero"`
	// History is status_history, oldest first. Added to version 1 without
	// a bump: older builds ignore the member (and drop it when they
	// rewrite the record), and records without it answer a history made
	// of created_at and updated_at (historyOf). It is left out when it is
	// that history (impliedHistory): a new revision's. Version 2 writes
	// it as one string (storedHistory).
	History storedHistory `json:"h,omitzero"`
	// Refs is the snapshot's secret_references (added to version 1
	// without a bump, as History).
	Refs []SecretReference `json:"srf,omitzero"`
}

// storedStatusChange is a StatusChange: the status and its time, in Unix
// microseconds (version 1) or microseconds after the revision's
// created_at (version 2; 0 left out).
type storedStatusChange struct {
	S storedEnum `json:"s"`
	T int64      `json:"t,omitzero"`
}

// storedHistory is a status_history as version 2 writes it: one string,
// each change its status's one-character code (enumCodes) and, unless 0,
// its time after created_at in decimal microseconds, the changes apart by
// commas ("C,Q1200,V3400,P150000,D900000": 32 bytes where the array took
// about 90). A history with a status that has no code is written as the
// array of storedStatusChange, which version 1 wrote, and which reads too.
type storedHistory []storedStatusChange

// MarshalJSON writes h as its string, or as the array.
func (h storedHistory) MarshalJSON() ([]byte, error) {
	if len(h) == 0 {
		return []byte("[]"), nil
	}
	b := make([]byte, 0, 2+8*len(h))
	b = append(b, '"')
	for i, c := range h {
		code, ok := enumCodes[string(c.S)]
		if !ok {
			return json.Marshal([]storedStatusChange(h))
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, code...)
		if c.T != 0 {
			b = strconv.AppendInt(b, c.T, 10)
		}
	}
	return append(b, '"'), nil
}

// UnmarshalJSON reads a history written by MarshalJSON, either form.
func (h *storedHistory) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '"' {
		return json.Unmarshal(b, (*[]storedStatusChange)(h))
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return err
	}
	*h = nil
	if str == "" {
		return nil
	}
	for c := range strings.SplitSeq(str, ",") {
		v, ok := enumValues[c[:min(len(c), 1)]]
		if !ok {
			return fmt.Errorf("a status_history entry %q of no known status", c)
		}
		var t int64
		if len(c) > 1 {
			var err error
			if t, err = strconv.ParseInt(c[1:], 10, 64); err != nil {
				return fmt.Errorf("a status_history entry %q: %w", c, err)
			}
		}
		*h = append(*h, storedStatusChange{S: storedEnum(v), T: t})
	}
	return nil
}

// impliedHistory reports whether h is the history historyOf answers for a
// revision stored without one, which is then left out: a new revision's
// (CREATING at created_at), or one that moved once, at updated_at.
func impliedHistory(h []storedStatusChange, rev *Revision) bool {
	implied := historyOf(nil, rev)
	if len(h) != len(implied) {
		return false
	}
	for i, c := range implied {
		if h[i].S != storedEnum(c.Status) || h[i].T != micros(c.At) {
			return false
		}
	}
	return true
}

// historyOf answers the status_history of a revision stored with h: h, or,
// for a record stored without one, CREATING at created_at and, when the
// revision has moved on, its status at updated_at.
func historyOf(h []storedStatusChange, rev *Revision) []StatusChange {
	if len(h) == 0 {
		out := []StatusChange{{Status: RevisionCreating, At: rev.CreatedAt}}
		if rev.Status != RevisionCreating && rev.Status != "" {
			out = append(out, StatusChange{Status: rev.Status, At: rev.UpdatedAt})
		}
		return out
	}
	out := make([]StatusChange, len(h))
	for i, c := range h {
		out[i] = StatusChange{Status: RevisionStatus(c.S), At: fromMicros(c.T)}
	}
	return out
}

// ErrSecretKey is wrapped by the error of a read that meets secrets it
// cannot open: sealed while Options.SecretKey is not set, or sealed under
// another key (or copied from another record).
var ErrSecretKey = errors.New("controlplane: cannot open stored secrets (Options.SecretKey not set, or not the key they were sealed with)")

// secretCodec seals and opens the secrets of deployment and revision
// records. A nil sealer keeps them in plain text (no Options.SecretKey);
// err is the error of an unusable Options.SecretKey, returned by every
// write.
type secretCodec struct {
	sealer *seal.Sealer
	err    error
}

// secretsAAD binds sealed secrets to their record: kind, tenant and the
// record's ids as text ("id", or "deployment/id" for a revision), not its
// store key, so that the key layout may change without re-sealing.
func secretsAAD(kind, tenant, recordKey string) string {
	return "controlplane/" + kind + "/" + tenant + "/" + recordKey
}

// seal returns the stored members of secrets: plain (no key) or sealed.
func (c secretCodec) seal(secrets []Secret, aad string) ([]Secret, []byte, error) {
	if c.err != nil {
		return nil, nil, c.err
	}
	if c.sealer == nil || len(secrets) == 0 {
		return secrets, nil, nil
	}
	b, err := json.Marshal(secrets)
	if err != nil {
		return nil, nil, err
	}
	return nil, c.sealer.Seal(b, aad), nil
}

// open returns the secrets of a record from its stored members.
func (c secretCodec) open(plain []Secret, sealed []byte, aad, kind, id string) ([]Secret, error) {
	if len(sealed) == 0 {
		return plain, nil
	}
	if c.sealer == nil {
		return nil, fmt.Errorf("controlplane: %s %s holds sealed secrets: %w", kind, id, ErrSecretKey)
	}
	b, err := c.sealer.Open(sealed, aad)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %s %s: %w", kind, id, ErrSecretKey)
	}
	var out []Secret
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("controlplane: decoding the secrets of %s %s: %w", kind, id, err)
	}
	return out, nil
}

// encodeDeployment gives the storage form of r.
func (c secretCodec) encodeDeployment(tenant string, r *deploymentRecord) ([]byte, error) {
	d := &r.Deployment
	plain, sealed, err := c.seal(d.Secrets, secretsAAD("deployment", tenant, d.ID))
	if err != nil {
		return nil, err
	}
	config := storedSourceConfig(d.SourceConfig)
	config.ResourceSpec = nil // stored as Spec; nil lets an empty config be left out
	sd := &storedDeployment{
		V: recordVersion, ID: d.ID, Name: d.Name, Source: storedEnum(d.Source),
		Config: config, Spec: (*storedResourceSpec)(d.SourceConfig.ResourceSpec),
		Rev: storedRevisionConfig(d.SourceRevisionConfig), Secrets: plain, Sealed: sealed,
		Updated: storedUpdated(micros(d.CreatedAt), micros(d.UpdatedAt)), Status: storedEnum(d.Status),
		Latest: (*storedID)(d.LatestRevisionID), Active: (*storedID)(d.ActiveRevisionID), Image: d.ImageVersion, URL: d.URL, Tags: r.Tags,
		Remote:  d.RemoteReconciled,
		Message: d.StatusMessage, KeepTP: r.KeepTracingProject,
	}
	sd.Created = micros(d.CreatedAt)
	b, err := json.Marshal(sd)
	if err != nil {
		return nil, err
	}
	return insertRowMembers(b, d)
}

// decodeDeployment reads a stored deployment record of any version this
// build understands.
func (c secretCodec) decodeDeployment(b []byte, tenant, id string) (*deploymentRecord, error) {
	if err := checkRecordVersion(b, "deployment", id); err != nil {
		return nil, err
	}
	var s storedDeployment
	if err := jsonv2.Unmarshal(b, &s); err != nil { // about twice as fast as encoding/json here
		return nil, fmt.Errorf("controlplane: decoding deployment %s: %w", id, err)
	}
	r := deploymentRecord{Deployment: Deployment{
		ID: id, Name: s.Name, Source: Source(s.Source),
		SourceConfig: SourceConfig(s.Config), SourceRevisionConfig: SourceRevisionConfig(s.Rev), Secrets: s.Secrets,
		Status:           DeploymentStatus(s.Status),
		LatestRevisionID: (*string)(s.Latest), ActiveRevisionID: (*string)(s.Active), ImageVersion: s.Image, URL: s.URL,
		RemoteReconciled: s.Remote,
		StatusMessage:    s.Message,
	}, Tags: s.Tags, KeepTracingProject: s.KeepTP}
	r.CreatedAt, r.UpdatedAt = fromMicros(s.Created), fromMicros(updatedOf(s.Created, s.Updated))
	r.SourceConfig.ResourceSpec = (*ResourceSpec)(s.Spec)
	if err := readRowMembers(b, &r.Deployment); err != nil {
		return nil, fmt.Errorf("controlplane: decoding deployment %s: %w", id, err)
	}
	var err error
	if r.Secrets, err = c.open(s.Secrets, s.Sealed, secretsAAD("deployment", tenant, id), "deployment", id); err != nil {
		return nil, err
	}
	if r.Secrets == nil {
		r.Secrets = []Secret{}
	}
	r.TenantID = tenant // the record's key holds it
	return &r, nil
}

// encodeRevision gives the storage form of rev.
func (c secretCodec) encodeRevision(tenant string, rev *revisionRecord) ([]byte, error) {
	plain, sealed, err := c.seal(rev.Secrets, secretsAAD("revision", tenant, rev.DeploymentID+"/"+rev.ID))
	if err != nil {
		return nil, err
	}
	hist := make(storedHistory, len(rev.StatusHistory))
	for i, h := range rev.StatusHistory {
		hist[i] = storedStatusChange{S: storedEnum(h.Status), T: micros(h.At)}
	}
	if impliedHistory(hist, &rev.Revision) {
		hist = nil // historyOf answers it from created_at and updated_at
	}
	created := micros(rev.CreatedAt)
	for i := range hist {
		hist[i].T -= created // version 2: after created_at
	}
	sr := &storedRevision{
		V: recordVersion, ID: rev.ID, DeploymentID: rev.DeploymentID,
		Updated: storedUpdated(micros(rev.CreatedAt), micros(rev.UpdatedAt)),
		Status:  storedEnum(rev.Status), Source: storedEnum(rev.Source),
		Rev: storedRevisionConfig(rev.Revision.SourceRevisionConfig), Message: rev.StatusMessage,
		Secrets: plain, Sealed: sealed, Spec: (*storedResourceSpec)(rev.revisionSnapshot.ResourceSpec),
		InstallCommand: rev.revisionSnapshot.InstallCommand, BuildCommand: rev.revisionSnapshot.BuildCommand,
		ImageVersion: rev.revisionSnapshot.ImageVersion, Tracked: rev.TrackedPackages, History: hist,
		Refs: rev.revisionSnapshot.SecretReferences,
	}
	sr.Created, sr.CreatedIn = storedCreated(rev.ID, created)
	return json.Marshal(sr)
}

// decodeRevision reads a stored revision record of any version this build
// understands.
func (c secretCodec) decodeRevision(b []byte, tenant, deploymentID, id string) (*revisionRecord, error) {
	if err := checkRecordVersion(b, "revision", id); err != nil {
		return nil, err
	}
	var s storedRevision
	if err := jsonv2.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("controlplane: decoding revision %s: %w", id, err)
	}
	r := revisionRecord{
		Revision: Revision{ID: id,
			Status: RevisionStatus(s.Status), Source: Source(s.Source), SourceRevisionConfig: SourceRevisionConfig(s.Rev), StatusMessage: s.Message,
			TrackedPackages: s.Tracked},
		revisionSnapshot: revisionSnapshot{DeploymentID: deploymentID, Secrets: s.Secrets, ResourceSpec: (*ResourceSpec)(s.Spec),
			InstallCommand: s.InstallCommand, BuildCommand: s.BuildCommand, ImageVersion: s.ImageVersion,
			SecretReferences: s.Refs},
	}
	created, err := createdOf(id, s.Created, s.CreatedIn)
	if err != nil {
		return nil, fmt.Errorf("controlplane: decoding revision %s: %w", id, err)
	}
	r.CreatedAt, r.UpdatedAt = fromMicros(created), fromMicros(updatedOf(created, s.Updated))
	if r.Secrets, err = c.open(s.Secrets, s.Sealed, secretsAAD("revision", tenant, deploymentID+"/"+id), "revision", id); err != nil {
		return nil, err
	}
	if s.V >= 2 {
		for i := range s.History {
			s.History[i].T += created
		}
	}
	r.StatusHistory = historyOf(s.History, &r.Revision)
	return &r, nil
}
