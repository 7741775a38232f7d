package inflight

import (
	"testing"
	"unsafe"
)

// TestEntrySize: a key's record fills whole cache lines (see entry).
func TestEntrySize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sized for 64-bit platforms")
	}
	if got := unsafe.Sizeof(entry{}); got != 192 {
		t.Errorf("entry is %d bytes, want 192 (adjust entryPad)", got)
	}
	if got := unsafe.Sizeof(slot{}); got != 32 {
		t.Errorf("slot is %d bytes, want 32", got)
	}
}
