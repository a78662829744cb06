package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/deployplane/deployplane/apierr"
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
// (its order record) can answer.
type summaryFilter struct {
	needle string // lowercased name_contains
	status string
	dtype  string
	source string
	// notSource: the source must differ (remote_reconciled=false: every
	// source but external_docker).
	notSource string
	image     string // "=" + version, or "" for no filter
	// listener is the canonical listener id, or "": the summary does not
	// hold it, so check looks the deployment up in the listener index.
	listener string
	enabled  bool
}

func newSummaryFilter(q *ListDeploymentsQuery) summaryFilter {
	f := summaryFilter{needle: strings.ToLower(q.NameContains), status: string(q.Status), dtype: string(q.DeploymentType)}
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
	f.enabled = f.active()
	return f
}

// active reports whether the filter has a condition.
func (f *summaryFilter) active() bool {
	return f.needle != "" || f.status != "" || f.dtype != "" || f.source != "" || f.notSource != "" || f.image != "" || f.listener != ""
}

// match reports whether an order-record summary passes the filter, but
// for the listener, which the summary does not hold (check and listByIDs
// look at it).
func (f *summaryFilter) match(s string) bool {
	name, rest, _ := strings.Cut(s, "\x00")
	if f.needle != "" && !strings.Contains(name, f.needle) {
		return false
	}
	status, rest, _ := strings.Cut(rest, "\x00")
	dtype, rest, _ := strings.Cut(rest, "\x00")
	source, image, _ := strings.Cut(rest, "\x00")
	return (f.status == "" || f.status == status) && (f.dtype == "" || f.dtype == dtype) &&
		(f.source == "" || f.source == source) && (f.notSource == "" || f.notSource != source) && (f.image == "" || f.image == image)
}

// ListDeployments returns one page of the tenant's deployments matching
// every filter of q, newest first (created_at desc, then id desc). A nil q
// lists everything with the default limit. Errors: *apierr.ValidationError at
// ["query", name].
//
// Cost: the page is found through the index records, never by decoding the
// tenant's deployments. With deployment_ids, each id is one Get. Otherwise
// one source is walked newest first: the tag indexes (tag_value_ids,
// merged), else the listener index (ListenerID), the image version index,
// the gram index (name_contains), the deployment type, status or source
// index (remote_reconciled=false: the other sources' indexes, merged), else
// the order records; the other filters are checked on each candidate's
// summary record (and the listener on its listener index record). Offset skips
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
		var tails []string // timeKey+encID(id) of the page, newest first
		tp, err := cp.readTenant(r, tenant)
		if err != nil {
			return err
		}
		switch {
		case len(q.DeploymentIDs) > 0:
			return cp.listByIDs(r, tenant, q, &f, limit, &page)
		case len(q.TagValueIDs) > 0:
			tails, err = listByTags(r, tp, q, &f, limit)
		default:
			tails, err = listByIndex(r, tp, q, &f, limit)
		}
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

// listByIndex walks one index newest first and returns the tails
// (timeKey+encID(id)) of the page: the index that answers one filter
// exactly, the gram index for name_contains (grams.go), or the order
// records when there is no filter, whose offset is skipped over the order
// counts (ordercounts.go). The other filters are checked on the
// candidates' summaries. tp is the tenant prefix.
func listByIndex(r store.Reader, tp string, q *ListDeploymentsQuery, f *summaryFilter, limit int) ([]string, error) {
	col, prefix := colDeploymentOrder, tp
	// rest is the filter less what the walked index answers: the index
	// records of a field are written from the same record as its summary,
	// in the same Update, so the summary need not be read for it.
	rest := *f
	// Priority: most selective first, as a rule of thumb (no counts are
	// kept): an image version names few deployments, a name substring is
	// usually rare, types and statuses are shared by many.
	switch {
	case f.listener != "":
		col, prefix = colDeploymentIndex, indexPrefix(tp, idxListener, f.listener)
		rest.listener = ""
	case q.ImageVersion != "":
		col, prefix = colDeploymentIndex, indexPrefix(tp, idxImage, q.ImageVersion)
		rest.image = ""
	case f.needle != "":
		col = ""
	case q.DeploymentType != "":
		col, prefix = colDeploymentIndex, indexPrefix(tp, idxType, string(q.DeploymentType))
		rest.dtype = ""
	case q.Status != "":
		col, prefix = colDeploymentIndex, indexPrefix(tp, idxStatus, string(q.Status))
		rest.status = ""
	case f.source != "":
		col, prefix = colDeploymentIndex, indexPrefix(tp, idxSource, f.source)
		rest.source = ""
	}
	rest.enabled = rest.active()
	f = &rest
	skip := q.Offset
	var tails []string
	visit := func(tail string) (bool, error) {
		if f.enabled {
			ok, err := f.check(r, tp, tail)
			if err != nil || !ok {
				return err == nil, err
			}
		}
		if skip > 0 {
			skip--
			return true, nil
		}
		tails = append(tails, tail)
		return len(tails) < limit, nil
	}
	if col == "" {
		// The gram index yields exactly the matches; summaries are read
		// only when another filter needs them.
		needle := f.needle
		if len(needle) < gramLen {
			lists, err := shortNeedleLists(r, tp, needle, shortNeedleMany)
			if err != nil {
				return nil, err
			}
			if len(lists) > shortNeedleMany {
				done, err := newestSummaries(r, tp, f, q.Offset, limit, &tails)
				if err != nil || done {
					return tails, err
				}
				tails = nil
			}
		}
		names := *f
		names.needle = ""
		names.enabled = names.active()
		f = &names
		err := scanGrams(r, tp, needle, visit)
		return tails, err
	}
	if col == colDeploymentOrder && f.notSource != "" {
		// remote_reconciled=false: the source indexes of every other
		// source, merged newest first, rather than every deployment's
		// summary (all but a few may be external_docker).
		var its []tailIter
		for _, s := range Sources() {
			if string(s) != f.notSource {
				its = append(its, &tagCursor{prefix: indexPrefix(tp, idxSource, string(s))})
			}
		}
		others := *f
		others.notSource = ""
		others.enabled = others.active()
		f = &others
		err := mergeNewest(r, its, visit)
		return tails, err
	}
	opts := &store.ScanOptions{Reverse: true}
	if col == colDeploymentOrder && !f.enabled && skip > 0 {
		start, rest, err := skipOrder(r, tp, skip)
		if err != nil || start == "" {
			return nil, err
		}
		opts.Start, skip = start, rest
	}
	err := r.Scan(col, prefix, opts, func(k string, _ []byte) (bool, error) {
		return visit(k[len(prefix):])
	})
	return tails, err
}

// A needle of 1 or 2 bytes is often in many names (a digit, a letter),
// and the lists of its grams are then many (one per gram it starts and
// place, grams.go), so that merging them costs a seek per list before the
// first answer: when it has more than shortNeedleMany lists,
// newestSummaries first walks the tenant's newest summaries, up to
// shortNeedleBudget of them, and is done when the page fills (or the
// tenant has no more); otherwise the gram lists answer.
// (Variables only so that the tests may draw them small.)
var (
	shortNeedleMany   = 32
	shortNeedleBudget = 1024
)

// newestSummaries walks the summaries of the tenant newest first, at most
// min(4*(offset+limit), shortNeedleBudget) of them, and appends to *tails
// the page of those f matches. done reports whether that page is the
// answer: it is full, or every summary was walked.
func newestSummaries(r store.Reader, tp string, f *summaryFilter, offset, limit int, tails *[]string) (done bool, err error) {
	budget := min(4*(offset+limit), shortNeedleBudget)
	n, skip := 0, offset
	done = true
	err = r.Scan(colDeploymentSums, tp, &store.ScanOptions{Reverse: true}, func(k string, v []byte) (bool, error) {
		if n++; n > budget {
			done = false
			return false, nil
		}
		if !f.match(string(v)) {
			return true, nil
		}
		if skip > 0 {
			skip--
			return true, nil
		}
		*tails = append(*tails, k[len(tp):])
		return len(*tails) < limit, nil
	})
	return done, err
}

// check reads the summary of the deployment at tail and matches it, and
// with a listener filter looks for the deployment's listener index record.
func (f *summaryFilter) check(r store.Reader, tp, tail string) (bool, error) {
	b, err := r.Get(colDeploymentSums, tp+tail)
	if err != nil {
		return false, fmt.Errorf("controlplane: deployment %s has no summary record: %w", tailID(tail), err)
	}
	if !f.match(string(b)) {
		return false, nil
	}
	if f.listener == "" {
		return true, nil
	}
	_, err = r.Get(colDeploymentIndex, indexPrefix(tp, idxListener, f.listener)+tail)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// tagCursor walks one list of keys (a tag index, a gram's records) newest
// first, a chunk at a time.
type tagCursor struct {
	col    string // colDeploymentIndex when ""
	prefix string
	buf    []string // tails read and not yet merged, newest first
	last   string   // the last key read: where the next chunk starts
	chunk  int      // the size of the last chunk read
	done   bool
}

const tagChunk = 128

func (c *tagCursor) fill(r store.Reader) error {
	if len(c.buf) > 0 || c.done {
		return nil
	}
	opts := &store.ScanOptions{Reverse: true, Start: c.last}
	// The first chunk is small (many cursors may be merged, most of which
	// give few records to a page), the later ones double up to tagChunk.
	chunk := max(min(2*c.chunk, tagChunk), 8)
	c.chunk = chunk
	n := 0
	col := c.col
	if col == "" {
		col = colDeploymentIndex
	}
	err := r.Scan(col, c.prefix, opts, func(k string, _ []byte) (bool, error) {
		if k == c.last {
			return true, nil // Start is inclusive: already merged
		}
		c.buf = append(c.buf, k[len(c.prefix):])
		c.last = k
		n++
		return n < chunk, nil
	})
	c.done = n < chunk
	return err
}

// listByTags merges the tag indexes of the wanted tags (a deployment matches
// if it carries any of them) newest first, reading each a chunk at a time,
// and checks the other filters on the summaries: the cost follows offset +
// limit, not the number of tagged deployments.
func listByTags(r store.Reader, tp string, q *ListDeploymentsQuery, f *summaryFilter, limit int) ([]string, error) {
	var cursors []*tagCursor
	for _, tag := range q.TagValueIDs {
		cid, _ := pathID(tag)
		prefix := indexPrefix(tp, idxTag, cid)
		if !slices.ContainsFunc(cursors, func(c *tagCursor) bool { return c.prefix == prefix }) {
			cursors = append(cursors, &tagCursor{prefix: prefix})
		}
	}
	skip := q.Offset
	var tails []string
	for len(tails) < limit {
		var tail string
		for _, c := range cursors {
			if err := c.fill(r); err != nil {
				return nil, err
			}
			if len(c.buf) > 0 && c.buf[0] > tail {
				tail = c.buf[0]
			}
		}
		if tail == "" {
			break
		}
		for _, c := range cursors { // the newest, once, whichever tags carry it
			if len(c.buf) > 0 && c.buf[0] == tail {
				c.buf = c.buf[1:]
			}
		}
		if f.enabled {
			ok, err := f.check(r, tp, tail)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		if skip > 0 {
			skip--
			continue
		}
		tails = append(tails, tail)
	}
	return tails, nil
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
		if q.RemoteReconciled != nil && *q.RemoteReconciled != (d.Source == SourceExternalDocker) {
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
// prefix+timeKey+encID(id)) and returns the ids of one page: of the records
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
