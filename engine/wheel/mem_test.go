package wheel

import "runtime"

var sink []any

// keep stops the compiler from freeing what a benchmark measures.
func keep(v ...any) { sink = v }

// heapAlloc returns the live heap after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
