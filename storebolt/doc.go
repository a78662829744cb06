// Package storebolt is a store.Store kept in a single go.etcd.io/bbolt file:
// deployplane's embedded, durable default.
//
// (Package documentation is completed with measured figures below.)
package storebolt
