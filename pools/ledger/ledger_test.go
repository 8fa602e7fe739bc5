package ledger

import (
	"os"
	"strings"
	"testing"
)

// TestSchedulerLedger replays testdata/pools/scheduler.ledger.jsonl, written
// by ledger_demo.py through the hook: 11 requests were retried and matched
// their 256-token prefix twice, so 11 × 256 tokens stay held at every idle
// mark after the first retry, all from the retry's stack.
func TestSchedulerLedger(t *testing.T) {
	f, err := os.Open("../../testdata/pools/scheduler.ledger.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if l.Pool != "token_to_kv_pool" || l.Unit != "tokens" || l.Capacity != 65536 || l.Unparsed != 0 || len(l.Idles) != 20 {
		t.Fatalf("header %s %s %d, %d unparsed, %d idles", l.Pool, l.Unit, l.Capacity, l.Unparsed, len(l.Idles))
	}
	stacks := ByStack(l.End)
	if len(stacks) != 1 || stacks[0].N != 11*256 || stacks[0].Allocs != 11 || len(stacks[0].Owners) != 11 {
		t.Fatalf("held at the end by stack: %+v", stacks)
	}
	fs := l.Stacks[stacks[0].Stack]
	if len(fs) < 2 || fs[0].Function != "match_prefix" || fs[1].Function != "retry_rejected" {
		t.Errorf("stack %+v, want match_prefix from retry_rejected", fs)
	}
	if last := l.Idles[len(l.Idles)-1]; last.Held != 11*256 {
		t.Errorf("last idle held %d", last.Held)
	}
}

// TestSlotsAndDamage: frees by slot index close exactly those slots, and a
// half-written last line (a killed program) is counted, not fatal.
func TestSlotsAndDamage(t *testing.T) {
	text := `{"format":"vramscope-pool-ledger","version":1,"pool":"req_to_token_pool","capacity":8,"unit":"slots","pid":7,"rank":0,"t":0}
{"op":"stack","id":0,"frames":[["srv.py",10,"admit"]]}
{"op":"alloc","t":1,"n":3,"owner":"a","slots":[0,1,2],"stack":0}
{"op":"alloc","t":2,"n":1,"owner":"b","slots":[3],"stack":0}
{"op":"free","t":3,"n":2,"owner":"a","slots":[0,2]}
{"op":"free","t":4,"n":1,"owner":"b","slots":[3]}
{"op":"idle","t":5}
{"op":"alloc","t":6,"n":2,"ow`
	l, err := Read(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if l.Unparsed != 1 || !strings.HasPrefix(l.FirstUnparsed, "line 8:") {
		t.Errorf("unparsed %d %q", l.Unparsed, l.FirstUnparsed)
	}
	if len(l.AtIdle) != 1 || l.AtIdle[0].Owner != "a" || l.AtIdle[0].N != 1 || len(l.AtIdle[0].Slots) != 1 || l.AtIdle[0].Slots[0] != 1 {
		t.Errorf("held at idle %+v, want slot 1 of a", l.AtIdle)
	}
	if _, err := Read(strings.NewReader(`{"op":"idle","t":5}`)); err == nil {
		t.Error("a ledger without header read without error")
	}
}
