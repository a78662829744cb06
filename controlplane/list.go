package controlplane

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/store"
)

func (c *checker) page(limit *int, offset int) {
	if limit != nil {
		switch {
		case *limit < 1:
			c.add([]any{"query", "limit"}, apierr.TypeGreaterThanEqual, "Input should be greater than or equal to 1")
		case *limit > MaxPageLimit:
			c.add([]any{"query", "limit"}, apierr.TypeLessThanEqual, fmt.Sprintf("Input should be less than or equal to %d", MaxPageLimit))
		}
	}
	if offset < 0 {
		c.add([]any{"query", "offset"}, apierr.TypeGreaterThanEqual, "Input should be greater than or equal to 0")
	}
}

func (c *checker) queryIDs(name string, ids []string) {
	loc := []any{"query", name}
	if len(ids) > c.lim.MaxFilterIDs {
		c.add(loc, apierr.TypeTooLong, fmt.Sprintf("List should have at most %d items", c.lim.MaxFilterIDs))
		return
	}
	for _, id := range ids {
		if !validUUID(id) {
			c.add(loc, apierr.TypeUUIDParsing, "Input should be a comma-separated list of valid UUIDs")
			return
		}
	}
}

func limitOf(l *int) int {
	if l == nil {
		return DefaultPageLimit
	}
	return *l
}

// Validate reports every bad value of q as a *apierr.ValidationError with loc
// ["query", name], using DefaultLimits. A caller that serves a
// ControlPlane with other Options.Limits uses ValidateWith(cp.Limits()),
// which is what ListDeployments applies.
func (q *ListDeploymentsQuery) Validate() error {
	return q.ValidateWith(DefaultLimits())
}

// ValidateWith is Validate with the given limits (a ControlPlane's
// Limits()).
func (q *ListDeploymentsQuery) ValidateWith(lim Limits) error {
	c := &checker{lim: lim}
	c.page(q.Limit, q.Offset)
	if len(q.NameContains) > 63 {
		c.add([]any{"query", "name_contains"}, apierr.TypeStringTooLong, "String should have at most 63 characters")
	}
	if q.Status != "" && !slices.Contains(DeploymentStatuses(), q.Status) {
		c.add([]any{"query", "status"}, apierr.TypeLiteralError, literalMsg(DeploymentStatuses()))
	}
	c.queryIDs("tag_value_ids", q.TagValueIDs)
	if len(q.ImageVersion) > lim.MaxStringBytes {
		c.add([]any{"query", "image_version"}, apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d bytes", lim.MaxStringBytes))
	}
	if q.DeploymentType != "" && !slices.Contains(DeploymentTypes(), q.DeploymentType) {
		c.add([]any{"query", "deployment_type"}, apierr.TypeLiteralError, literalMsg(DeploymentTypes()))
	}
	c.queryIDs("deployment_ids", q.DeploymentIDs)
	if len(q.Name) > 63 {
		c.add([]any{"query", "name"}, apierr.TypeStringTooLong, "String should have at most 63 characters")
	}
	if len(q.AgentID) > MaxAgentIDBytes {
		c.add([]any{"query", "agent_id"}, apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d bytes", MaxAgentIDBytes))
	}
	if q.AgentEnvironment != "" && !slices.Contains(AgentEnvironments(), q.AgentEnvironment) {
		c.add([]any{"query", "agent_environment"}, apierr.TypeLiteralError, literalMsg(AgentEnvironments()))
	}
	if q.ListenerID != "" && !validUUID(q.ListenerID) {
		c.add([]any{"query", "listener_id"}, apierr.TypeUUIDParsing, apierr.MsgInvalidUUID)
	}
	return apierr.Validation(c.ps...)
}

// Validate reports every bad value of q as a *apierr.ValidationError with loc
// ["query", name]. (No limit of Limits applies to it yet; ValidateWith
// exists so that callers treat every query alike.)
func (q *ListRevisionsQuery) Validate() error { return q.ValidateWith(DefaultLimits()) }

// ValidateWith is Validate with the given limits (a ControlPlane's
// Limits()).
func (q *ListRevisionsQuery) ValidateWith(lim Limits) error {
	c := &checker{lim: lim}
	c.page(q.Limit, q.Offset)
	for _, s := range q.Status {
		if !validRevisionStatus(s) {
			c.add([]any{"query", "status"}, apierr.TypeLiteralError, "Input should be a comma-separated list of revision statuses")
			break
		}
	}
	return apierr.Validation(c.ps...)
}

// Validate reports every bad value of q as a *apierr.ValidationError with loc
// ["query", name].
func (q *ListListenersQuery) Validate() error { return q.ValidateWith(DefaultLimits()) }

// ValidateWith is Validate with the given limits (a ControlPlane's
// Limits()).
func (q *ListListenersQuery) ValidateWith(lim Limits) error {
	c := &checker{lim: lim}
	c.page(q.Limit, q.Offset)
	return apierr.Validation(c.ps...)
}

func validRevisionStatus(s RevisionStatus) bool { return slices.Contains(RevisionStatuses(), s) }

// literalMsg is the message of a literal_error over values: "Input should
// be 'a', 'b' or 'c'".
func literalMsg[T ~string](values []T) string {
	var b strings.Builder
	b.WriteString("Input should be ")
	for i, v := range values {
		switch {
		case i == len(values)-1 && i > 0:
			b.WriteString(" or ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString("'" + string(v) + "'")
	}
	return b.String()
}

// summaryFilter is the part of a list query that a deployment's summary
// (its summary record) can answer.
type summaryFilter struct {
	needle string // lowercased name_contains
	exact  string // lowercased name: the summary holds no other case
	status string
	dtype  string
	source string
	// notSource: the source must differ (remote_reconciled=false: every
	// source but external_docker).
	notSource string
	image     string // "=" + version, or "" for no filter
	// listener is the canonical listener id, or "": the summary does not
	// hold it, so the index looks at the deployment's listener term.
	listener string
}

func newSummaryFilter(q *ListDeploymentsQuery) summaryFilter {
	f := summaryFilter{needle: strings.ToLower(q.NameContains), exact: strings.ToLower(q.Name), status: string(q.Status), dtype: string(q.DeploymentType)}
	if q.RemoteReconciled != nil {
		if *q.RemoteReconciled {
			f.source = string(SourceExternalDocker)
		} else {
			f.notSource = string(SourceExternalDocker)
		}
	}
	if q.ImageVersion != "" {
		f.image = "=" + q.ImageVersion
	}
	if q.ListenerID != "" {
		f.listener, _ = pathID(q.ListenerID)
	}
	return f
}

// match reports whether a summary passes the filter, but for the
// listener, which the summary does not hold (the index and listByIDs look
// at it).
func (f *summaryFilter) match(s string) bool {
	name, rest, _ := strings.Cut(s, "\x00")
	if f.needle != "" && !strings.Contains(name, f.needle) || f.exact != "" && name != f.exact {
		return false
	}
	status, rest, _ := strings.Cut(rest, "\x00")
	dtype, rest, _ := strings.Cut(rest, "\x00")
	source, image, _ := strings.Cut(rest, "\x00")
	status, dtype, source = summaryText(status), summaryText(dtype), summaryText(source)
	return (f.status == "" || f.status == status) && (f.dtype == "" || f.dtype == dtype) &&
		(f.source == "" || f.source == source) && (f.notSource == "" || f.notSource != source) && (f.image == "" || f.image == image)
}

// ListDeployments returns one page of the tenant's deployments matching
// every filter of q, newest first (created_at desc, then id desc). A nil q
// lists everything with the default limit. Errors: *apierr.ValidationError at
// ["query", name].
//
// Cost: the page is found through the name and order index
// (internal/index), never by decoding the tenant's deployments. With
// deployment_ids, each id is one Get. Otherwise one source is walked
// newest first (indexQuery): the tag terms (tag_value_ids, merged), else
// the listener term (ListenerID), the image version term, the gram index
// (name_contains), the deployment type, status or source term
// (remote_reconciled=false: the other sources' terms, merged), else the
// order records; the other filters are checked on each candidate's
// summary record (and the listener on its listener term). Offset skips
// index entries; only the returned page is decoded.
func (cp *ControlPlane) ListDeployments(ctx context.Context, tenant string, q *ListDeploymentsQuery) (*DeploymentPage, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if q == nil {
		q = &ListDeploymentsQuery{}
	}
	if err := q.ValidateWith(cp.lim); err != nil {
		return nil, err
	}
	limit := limitOf(q.Limit)
	f := newSummaryFilter(q)
	var page []Deployment
	err := cp.st.View(ctx, func(r store.Reader) error {
		page = page[:0]
		tp, err := cp.readTenant(r, tenant)
		if err != nil {
			return err
		}
		if len(q.DeploymentIDs) > 0 {
			return cp.listByIDs(r, tenant, q, &f, limit, &page)
		}
		if q.Name != "" {
			return cp.listByName(r, tenant, tp, q, f, limit, &page)
		}
		tails, err := cp.idx.List(r, tp, indexQuery(q, f, limit))
		if err != nil {
			return err
		}
		for _, t := range tails {
			id := tailID(t)
			rec, err := cp.getDeployment(r, tenant, id)
			if errors.Is(err, apierr.ErrNotFound) {
				return fmt.Errorf("controlplane: an index names the missing deployment %s", id)
			}
			if err != nil {
				return err
			}
			page = append(page, *rec.wire())
		}
		return nil
	})
	if err != nil {
		return nil, cp.storeErr("list deployments", err)
	}
	if page == nil {
		page = []Deployment{}
	}
	return &DeploymentPage{Resources: page, Offset: q.Offset + len(page)}, nil
}

// listByName lists the page of q with a name: the index's candidates
// whose name equals it but for case (the summary holds the lowercased
// name), decoded, those of that very name kept. Names are unique per
// tenant, so the page has one deployment at most and the candidates are
// the few names that differ from it in case only.
func (cp *ControlPlane) listByName(r store.Reader, tenant, tp string, q *ListDeploymentsQuery, f summaryFilter, limit int, page *[]Deployment) error {
	byName := *q
	byName.NameContains, byName.Offset = q.Name, 0
	needle := strings.ToLower(q.NameContains)
	tails, err := cp.idx.List(r, tp, indexQuery(&byName, f, math.MaxInt))
	if err != nil {
		return err
	}
	skip := q.Offset
	for _, t := range tails {
		rec, err := cp.getDeployment(r, tenant, tailID(t))
		if err != nil {
			return err
		}
		if rec.Name != q.Name || !strings.Contains(strings.ToLower(rec.Name), needle) {
			continue
		}
		if skip > 0 {
			skip--
			continue
		}
		if len(*page) < limit {
			*page = append(*page, *rec.wire())
		}
	}
	return nil
}

// agentMatch reports whether r passes q's agent filters.
func (q *ListDeploymentsQuery) agentMatch(r *deploymentRecord) bool {
	a := r.Agent
	if q.AgentID == "" && q.AgentEnvironment == "" {
		return true
	}
	return a != nil && (q.AgentID == "" || a.AgentID == q.AgentID) && (q.AgentEnvironment == "" || a.Environment == q.AgentEnvironment)
}

// agentTerm is the index term that answers q's agent filters exactly, ""
// when it has none.
func (q *ListDeploymentsQuery) agentTerm() string {
	switch {
	case q.AgentID != "" && q.AgentEnvironment != "":
		return agentLinkTerm(q.AgentID, q.AgentEnvironment)
	case q.AgentID != "":
		return indexTerm(idxAgent, q.AgentID)
	case q.AgentEnvironment != "":
		return indexTerm(idxEnv, string(q.AgentEnvironment))
	}
	return ""
}

// indexQuery is the index's query for q (without deployment_ids), f being
// q's filter: which terms to walk, and what to check on the candidates.
// With tag_value_ids, the tags' terms are walked; otherwise the term that
// answers one filter exactly, picked most selective first as a rule of
// thumb (no counts are kept): a listener or an image version names few
// deployments, a name substring (walked through its grams when no term
// is) is usually rare, types, statuses and sources are shared by many.
// The filter the walk answers is left out of Keep: the index records of a
// field are written from the same record as its summary, in the same
// Update, so the summary need not be read for it.
func indexQuery(q *ListDeploymentsQuery, f summaryFilter, limit int) *index.Query {
	iq := &index.Query{Name: q.NameContains, Offset: q.Offset, Limit: limit}
	f.needle = "" // the index's, by Name
	agent := q.agentTerm()
	switch {
	case len(q.TagValueIDs) > 0:
		for _, tag := range q.TagValueIDs {
			cid, _ := pathID(tag)
			iq.Terms = append(iq.Terms, indexTerm(idxTag, cid))
		}
		if f.listener != "" {
			iq.With = []string{indexTerm(idxListener, f.listener)}
		}
		if agent != "" {
			iq.With = append(iq.With, agent)
		}
	case f.listener != "":
		iq.Terms = []string{indexTerm(idxListener, f.listener)}
		if agent != "" {
			iq.With = []string{agent}
		}
	case agent != "":
		iq.Terms = []string{agent}
	case q.ImageVersion != "":
		iq.Terms, f.image = []string{indexTerm(idxImage, q.ImageVersion)}, ""
	case q.NameContains != "":
	case q.DeploymentType != "":
		iq.Terms, f.dtype = []string{indexTerm(idxType, string(q.DeploymentType))}, ""
	case q.Status != "":
		iq.Terms, f.status = []string{indexTerm(idxStatus, string(q.Status))}, ""
	case f.source != "":
		iq.Terms, f.source = []string{indexTerm(idxSource, f.source)}, ""
	case f.notSource != "":
		// remote_reconciled=false: the terms of every other source,
		// merged, rather than every deployment's summary (all but a few
		// may be external_docker).
		for _, s := range Sources() {
			if string(s) != f.notSource {
				iq.Terms = append(iq.Terms, indexTerm(idxSource, string(s)))
			}
		}
		f.notSource = ""
	}
	if f.status != "" || f.dtype != "" || f.source != "" || f.notSource != "" || f.image != "" || f.exact != "" {
		iq.Keep = func(summary []byte) bool { return f.match(string(summary)) }
	}
	return iq
}

// foldCounts folds the pending changes of the index's order counts in,
// and packs the new entries' gram records into the gram blocks, seqBatch
// changes per Update (the sequencer runs it).
func (cp *ControlPlane) foldCounts(ctx context.Context) error {
	return index.Fold(ctx, cp.st, &index.FoldOptions{Batch: seqBatch})
}

// listByIDs gets each named deployment and checks every filter on it.
func (cp *ControlPlane) listByIDs(r store.Reader, tenant string, q *ListDeploymentsQuery, f *summaryFilter, limit int, page *[]Deployment) error {
	seen := map[string]bool{}
	var recs []*deploymentRecord
	for _, id := range q.DeploymentIDs {
		cid, _ := pathID(id)
		if seen[cid] {
			continue
		}
		seen[cid] = true
		rec, err := cp.getDeployment(r, tenant, cid)
		if err != nil {
			if errors.Is(err, apierr.ErrNotFound) {
				continue
			}
			return err
		}
		if !f.match(rec.summary()) {
			continue
		}
		if l := rec.SourceConfig.ListenerID; f.listener != "" && (l == nil || *l != f.listener) {
			continue
		}
		if q.Name != "" && rec.Name != q.Name || !q.agentMatch(rec) {
			continue
		}
		if len(q.TagValueIDs) > 0 && !slices.ContainsFunc(q.TagValueIDs, func(t string) bool {
			ct, _ := pathID(t)
			return slices.Contains(rec.Tags, ct)
		}) {
			continue
		}
		recs = append(recs, rec)
	}
	slices.SortFunc(recs, func(a, b *deploymentRecord) int {
		return strings.Compare(b.tail(), a.tail())
	})
	for i := q.Offset; i < len(recs) && len(*page) < limit; i++ {
		*page = append(*page, *recs[i].wire())
	}
	return nil
}

// ListRevisions returns one page of a deployment's revisions, newest first,
// keeping those whose status is in q.Status (when given). Errors:
// *apierr.NotFoundError, *apierr.ValidationError.
func (cp *ControlPlane) ListRevisions(ctx context.Context, tenant, deploymentID string, q *ListRevisionsQuery) (*RevisionPage, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if q == nil {
		q = &ListRevisionsQuery{}
	}
	if err := q.ValidateWith(cp.lim); err != nil {
		return nil, err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	limit := limitOf(q.Limit)
	var page []Revision
	err := cp.st.View(ctx, func(r store.Reader) error {
		page = page[:0]
		d, err := cp.getDeployment(r, tenant, did)
		if err != nil {
			return err
		}
		if q.RemoteReconciled != nil && *q.RemoteReconciled != d.remote() {
			return nil
		}
		var keep func([]byte) bool
		if len(q.Status) > 0 {
			keep = func(status []byte) bool { return slices.Contains(q.Status, RevisionStatus(status)) }
		}
		tp, err := cp.readTenant(r, tenant)
		if err != nil {
			return err
		}
		ids, err := pageIDs(r, colRevisionOrder, deploymentKey(tp, did), q.Offset, limit, keep, tailID)
		if err != nil {
			return err
		}
		for _, id := range ids {
			rev, err := cp.getRevision(r, tenant, did, id)
			if err != nil {
				return err
			}
			page = append(page, rev.wire())
		}
		return nil
	})
	if err != nil {
		return nil, cp.storeErr("list revisions", err)
	}
	if page == nil {
		page = []Revision{}
	}
	return &RevisionPage{Resources: page, Offset: q.Offset + len(page)}, nil
}

// pageIDs walks the order records under prefix newest first (keys
// prefix+keyenc.Time+keyenc.ID(id)) and returns the ids of one page: of the records
// keep accepts (nil accepts all, and is given the record's value), it skips
// offset and returns at most limit; idOf reads the id from a key's tail
// (after prefix). Only keys are read, so a deep offset
// costs no decoding.
func pageIDs(r store.Reader, col, prefix string, offset, limit int, keep func(value []byte) bool, idOf func(tail string) string) ([]string, error) {
	var ids []string
	err := r.Scan(col, prefix, &store.ScanOptions{Reverse: true}, func(k string, v []byte) (bool, error) {
		if keep != nil && !keep(v) {
			return true, nil
		}
		if offset > 0 {
			offset--
			return true, nil
		}
		ids = append(ids, idOf(k[len(prefix):]))
		return len(ids) < limit, nil
	})
	return ids, err
}

// textTailID returns the id of a text order tail (createdKey/id): the
// listeners' order records.
func textTailID(tail string) string {
	_, id, _ := strings.Cut(tail, "/")
	return id
}
