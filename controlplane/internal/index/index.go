// Package index keeps the name and order index of each tenant's
// deployments: the records beside each deployment that let a list find
// its page without decoding deployments, and the walks that find it.
//
// An Entry is what the index holds of one deployment: its tail (its place
// in the newest-first order), name, summary and terms (the field values it
// is found by). Put and Remove write and delete an entry's records in the
// caller's transaction. Index.List returns a page of tails, newest first,
// walking the records of one or more terms, the trigrams of a name
// substring (grams.go), or the order records, whose offset it skips over
// counts of time windows (counts.go) that Fold keeps folded in (and with
// them packs the gram records into blocks: gramblocks.go); a
// Query.Keep callback checks on each candidate's summary what the walk
// does not answer. ScanTerm lists the entries of one term.
//
// It knows no deployment type and no rule: which fields an entry has terms
// for, how their values are encoded, what a summary holds after the name
// and which walk a query takes are the caller's. What it asks of the
// caller's parts of its keys:
//
//   - a tail is 8 bytes of time key (byte order is creation order) whose
//     first byte is not 0x00, then an id part whose first byte is below
//     0xff; a term is a field and a value. Each delimits itself: no tail
//     or term is a prefix of another.
//   - a name is 1 to MaxName bytes of [A-Za-z0-9._-]; a summary begins with
//     the lowercased name and a NUL.
//   - a tenant prefix (tp) is a tenant prefix of internal/keyenc, whose
//     length the index reads from its first byte (keyenc.TenantLen): a
//     pending change of the counts is keyed by tenant prefix and tail
//     alone, in the stores already written, and Fold folds every
//     tenant's changes in one scan.
//
// Storage (T the tenant prefix, ts D the tail):
//
//	cp_deployment_order         T ts D             -> ""
//	cp_deployment_summaries     T ts D             -> summary
//	cp_deployment_index         T term ts D        -> ""
//	cp_deployment_pgrams        T gram place ts D  -> "" (grams.go; a new entry's, until Fold)
//	cp_deployment_pgrams        T gram place 0x00  -> "" (the list has blocks; gramblocks.go)
//	cp_deployment_gram_blocks   T gram place first -> the list's tails from first, packed (gramblocks.go)
//	cp_deployment_counts        T n ts[:n]         -> count in the window (counts.go)
//	cp_deployment_count_changes T ts D +|-         -> "" (a change not yet folded in)
//
// The pages of the caller's other newest-first records (a deployment's
// revisions, the listeners) are not the index's: they hold no entry.
package index

import (
	"fmt"
	"slices"
	"strings"

	"github.com/deployplane/deployplane/store"
)

// The collections of the index.
const (
	ColOrder        = "cp_deployment_order"
	ColSummaries    = "cp_deployment_summaries"
	ColTerms        = "cp_deployment_index"
	ColGrams        = "cp_deployment_pgrams"
	ColGramBlocks   = "cp_deployment_gram_blocks"
	ColCounts       = "cp_deployment_counts"
	ColCountChanges = "cp_deployment_count_changes"
)

// Collections returns the names of the index's collections.
func Collections() []string {
	return []string{ColOrder, ColSummaries, ColGrams, ColGramBlocks, ColCounts, ColCountChanges, ColTerms}
}

// MaxName is the most bytes of a name.
const MaxName = 63

// Entry is what the index holds of one deployment.
type Entry struct {
	// Tail is the deployment's place in the order: 8 bytes of time key,
	// then its id part. It does not change.
	Tail string
	// Name is the deployment's name. It does not change.
	Name string
	// Summary is the value of the summary record, which Query.Keep is
	// given: the name lowercased, a NUL, then what the caller likes.
	Summary string
	// Terms are the field values the deployment is found by
	// (Query.Terms, Query.With, ScanTerm), each once.
	Terms []string
}

// check reports what of e the index cannot keep.
func (e *Entry) check() error {
	if e.Name == "" || len(e.Name) > MaxName || !nameBytesOK(strings.ToLower(e.Name)) {
		return fmt.Errorf("index: the name %q is not 1 to %d bytes of [A-Za-z0-9._-]", e.Name, MaxName)
	}
	if !strings.HasPrefix(e.Summary, strings.ToLower(e.Name)+"\x00") {
		return fmt.Errorf("index: the summary of %q does not begin with its lowercased name and a NUL", e.Name)
	}
	if len(e.Tail) < 9 || e.Tail[0] == 0 {
		return fmt.Errorf("index: the tail %q of %q is not a time key (not starting with 0x00) and an id", e.Tail, e.Name)
	}
	return nil
}

// writeFunc writes a record: a Tx's Put, or store.Insert.
type writeFunc func(collection, key string, value []byte) error

// Put writes the records of the tenant's entry e in tx, where old is the
// entry as Put last wrote it, or nil when e is new. A new entry's records
// are written with store.Insert (its tail is new, so no record has their
// keys); of an entry that was there, Put rewrites the summary when it
// changed and the terms that changed, and nothing else. The tail and the
// name of an entry do not change: Put refuses an old entry with others.
func Put(tx store.Tx, tp string, old, e *Entry) error {
	if err := e.check(); err != nil {
		return err
	}
	write := writeFunc(tx.Put)
	if old == nil {
		write = func(collection, key string, value []byte) error { return store.Insert(tx, collection, key, value) }
		if err := write(ColOrder, tp+e.Tail, nil); err != nil {
			return err
		}
		if err := putGrams(write, tp, e.Tail, e.Name); err != nil {
			return err
		}
		if err := countChange(write, tp, e.Tail, true); err != nil {
			return err
		}
	} else if old.Tail != e.Tail || old.Name != e.Name {
		return fmt.Errorf("index: the entry %q at %q became %q at %q: a tail and a name do not change", old.Name, old.Tail, e.Name, e.Tail)
	}
	if old == nil || old.Summary != e.Summary {
		if err := write(ColSummaries, tp+e.Tail, []byte(e.Summary)); err != nil {
			return err
		}
	}
	var oldTerms []string
	if old != nil {
		oldTerms = old.Terms
	}
	for _, t := range oldTerms {
		if !slices.Contains(e.Terms, t) {
			if err := tx.Delete(ColTerms, tp+t+e.Tail); err != nil {
				return err
			}
		}
	}
	for _, t := range e.Terms {
		if !slices.Contains(oldTerms, t) {
			if err := write(ColTerms, tp+t+e.Tail, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// Remove deletes the records of the tenant's entry e, as Put last wrote
// it, from tx.
func Remove(tx store.Tx, tp string, e *Entry) error {
	if err := deleteGrams(tx, tp, e.Tail, e.Name); err != nil {
		return err
	}
	if err := countChange(tx.Put, tp, e.Tail, false); err != nil {
		return err
	}
	for _, col := range []string{ColOrder, ColSummaries} {
		if err := tx.Delete(col, tp+e.Tail); err != nil {
			return err
		}
	}
	for _, t := range e.Terms {
		if err := tx.Delete(ColTerms, tp+t+e.Tail); err != nil {
			return err
		}
	}
	return nil
}

// ScanTerm calls fn with the tail of each of the tenant's entries that
// carry term, oldest first, from the first after the tail after (from the
// first, when after is ""), until fn returns false.
func ScanTerm(r store.Reader, tp, term, after string, fn func(tail string) (bool, error)) error {
	prefix := tp + term
	var opts *store.ScanOptions
	if after != "" {
		opts = &store.ScanOptions{Start: prefix + after + "\x00"} // no tail begins with another
	}
	return r.Scan(ColTerms, prefix, opts, func(k string, _ []byte) (bool, error) {
		return fn(k[len(prefix):])
	})
}
