// Package history keeps watch's samples on disk, in one bbolt file.
//
// Each series (a process on a GPU, or a device) has a bucket holding its
// metadata and two tiers: raw samples, packed one key per series and
// minute, for the raw retention, and per-minute rollups (min, max, last),
// packed one key per series and hour, for the full retention. A sample is
// a few bytes once packed: values are delta-encoded, and the memory a
// process holds rarely changes from one second to the next.
//
// Writes are buffered and committed in one transaction every FlushEvery;
// bbolt's copy-on-write pages and double meta page make a commit atomic,
// so a kill -9 loses at most the samples since the last flush and never
// the file.
package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Options set retention and durability.
type Options struct {
	// Raw is how long raw samples are kept; older ones are rolled up
	// into minutes.
	Raw time.Duration
	// Retention is how long minute rollups are kept; a series with no
	// sample for this long is deleted with its metadata.
	Retention time.Duration
	// FlushEvery is how often buffered samples are committed.
	FlushEvery time.Duration
}

// DefaultOptions keep 6 hours of raw samples, 30 days of minutes, and flush
// every 5 s.
var DefaultOptions = Options{Raw: 6 * time.Hour, Retention: 30 * 24 * time.Hour, FlushEvery: 5 * time.Second}

// Point is a sample (Min = Max = Last) or a minute's rollup.
type Point struct {
	T              time.Time
	Min, Max, Last int64
}

// Series is one stored series.
type Series struct {
	ID         string
	Meta       []byte
	First, End time.Time // first and last sample stored
}

var (
	seriesBucket = []byte("series")
	metaKey      = []byte("meta")
	rawBucket    = []byte("raw")
	rollBucket   = []byte("roll")
)

const (
	rawChunk  = time.Minute // one raw key per series and minute
	rollStep  = time.Minute // rollups are per minute
	rollChunk = time.Hour   // one rollup key per series and hour
)

// Store is an open history file.
type Store struct {
	db   *bolt.DB
	opts Options

	mu        sync.Mutex
	pending   map[string][]Point
	meta      map[string][]byte
	lastFlush time.Time
}

// Open opens or creates the history file at path. It fails at once when
// another process holds it.
func Open(path string, opts Options) (*Store, error) {
	if opts.Raw <= 0 || opts.Retention < opts.Raw || opts.FlushEvery <= 0 {
		return nil, fmt.Errorf("history: raw %v, retention %v, flush %v: want 0 < raw <= retention and a positive flush", opts.Raw, opts.Retention, opts.FlushEvery)
	}
	db, err := bolt.Open(path, 0o644, &bolt.Options{Timeout: time.Second})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("history %s: in use by another process", path)
	}
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(seriesBucket)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	return &Store{db: db, opts: opts, pending: map[string][]Point{}, meta: map[string][]byte{}}, nil
}

// Close flushes and closes the file.
func (s *Store) Close() error {
	err := s.Flush()
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// SetMeta stores id's metadata (what the series is) with the next flush.
func (s *Store) SetMeta(id string, meta []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.meta[id] = slices.Clone(meta)
}

// Add buffers a sample of id, and commits the buffer when FlushEvery has
// passed since the last commit.
func (s *Store) Add(id string, t time.Time, v int64) error {
	s.mu.Lock()
	s.pending[id] = append(s.pending[id], Point{T: t, Min: v, Max: v, Last: v})
	due := t.Sub(s.lastFlush) >= s.opts.FlushEvery
	s.mu.Unlock()
	if due {
		return s.Flush()
	}
	return nil
}

// Flush commits the buffered samples and metadata in one transaction.
func (s *Store) Flush() error {
	s.mu.Lock()
	pending, meta := s.pending, s.meta
	s.pending, s.meta = map[string][]Point{}, map[string][]byte{}
	var last time.Time
	for _, ps := range pending {
		if t := ps[len(ps)-1].T; t.After(last) {
			last = t
		}
	}
	if !last.IsZero() {
		s.lastFlush = last
	}
	s.mu.Unlock()
	if len(pending) == 0 && len(meta) == 0 {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(seriesBucket)
		for id, m := range meta {
			b, err := root.CreateBucketIfNotExists([]byte(id))
			if err != nil {
				return err
			}
			if err := b.Put(metaKey, m); err != nil {
				return err
			}
		}
		for id, ps := range pending {
			b, err := root.CreateBucketIfNotExists([]byte(id))
			if err != nil {
				return err
			}
			raw, err := b.CreateBucketIfNotExists(rawBucket)
			if err != nil {
				return err
			}
			if err := appendRaw(raw, ps); err != nil {
				return fmt.Errorf("series %s: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("history flush: %w", err)
	}
	return nil
}

// chunkKey is the big-endian unix millisecond start of the chunk holding
// t, so that keys sort by time.
func chunkKey(t time.Time, chunk time.Duration) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(t.Truncate(chunk).UnixMilli()))
}

func keyTime(k []byte) time.Time { return time.UnixMilli(int64(binary.BigEndian.Uint64(k))) }

// appendRaw adds points, in time order, to their minute chunks.
func appendRaw(raw *bolt.Bucket, ps []Point) error {
	for len(ps) > 0 {
		key := chunkKey(ps[0].T, rawChunk)
		n := 1
		for n < len(ps) && ps[n].T.Truncate(rawChunk).Equal(ps[0].T.Truncate(rawChunk)) {
			n++
		}
		old, err := decodeRaw(keyTime(key), raw.Get(key))
		if err != nil {
			return fmt.Errorf("chunk %v: %w", keyTime(key), err)
		}
		merged := old
		for _, p := range ps[:n] {
			if len(merged) > 0 && !p.T.After(merged[len(merged)-1].T) {
				continue // a clock step back: keep time rising
			}
			merged = append(merged, p)
		}
		if err := raw.Put(key, encodeRaw(keyTime(key), merged)); err != nil {
			return err
		}
		ps = ps[n:]
	}
	return nil
}

// encodeRaw packs points as (milliseconds since the previous point, value
// minus the previous value) varint pairs, the first against the chunk's
// start and 0.
func encodeRaw(start time.Time, ps []Point) []byte {
	var b []byte
	t, v := start.UnixMilli(), int64(0)
	for _, p := range ps {
		ms := p.T.UnixMilli()
		b = binary.AppendUvarint(b, uint64(ms-t))
		b = binary.AppendVarint(b, p.Last-v)
		t, v = ms, p.Last
	}
	return b
}

func decodeRaw(start time.Time, b []byte) ([]Point, error) {
	var ps []Point
	t, v := start.UnixMilli(), int64(0)
	for len(b) > 0 {
		dt, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("bad time delta")
		}
		b = b[n:]
		dv, n := binary.Varint(b)
		if n <= 0 {
			return nil, errors.New("bad value delta")
		}
		b = b[n:]
		t, v = t+int64(dt), v+dv
		ps = append(ps, Point{T: time.UnixMilli(t), Min: v, Max: v, Last: v})
	}
	return ps, nil
}

// encodeRoll packs minute rollups as (minutes since the previous one,
// min minus the previous min, max minus min, last minus min).
func encodeRoll(start time.Time, ps []Point) []byte {
	var b []byte
	t, lo := start.UnixMilli(), int64(0)
	for _, p := range ps {
		ms := p.T.UnixMilli()
		b = binary.AppendUvarint(b, uint64((ms-t)/rollStep.Milliseconds()))
		b = binary.AppendVarint(b, p.Min-lo)
		b = binary.AppendUvarint(b, uint64(p.Max-p.Min))
		b = binary.AppendUvarint(b, uint64(p.Last-p.Min))
		t, lo = ms, p.Min
	}
	return b
}

func decodeRoll(start time.Time, b []byte) ([]Point, error) {
	var ps []Point
	t, lo := start.UnixMilli(), int64(0)
	for len(b) > 0 {
		var f [4]int64
		for i := range f {
			var n int
			if i == 1 {
				f[i], n = binary.Varint(b)
			} else {
				var u uint64
				u, n = binary.Uvarint(b)
				f[i] = int64(u)
			}
			if n <= 0 {
				return nil, errors.New("bad rollup")
			}
			b = b[n:]
		}
		t, lo = t+f[0]*rollStep.Milliseconds(), lo+f[1]
		ps = append(ps, Point{T: time.UnixMilli(t), Min: lo, Max: lo + f[2], Last: lo + f[3]})
	}
	return ps, nil
}

// rollup reduces raw points to one point per minute.
func rollup(ps []Point) []Point {
	var out []Point
	for _, p := range ps {
		m := p.T.Truncate(rollStep)
		if n := len(out); n > 0 && out[n-1].T.Equal(m) {
			o := &out[n-1]
			o.Min, o.Max, o.Last = min(o.Min, p.Min), max(o.Max, p.Max), p.Last
			continue
		}
		out = append(out, Point{T: m, Min: p.Min, Max: p.Max, Last: p.Last})
	}
	return out
}

// Compact rolls raw chunks older than the raw retention into minutes,
// drops rollups older than the retention, and deletes series with nothing
// left. The agent calls it every few minutes.
func (s *Store) Compact(now time.Time) error {
	if err := s.Flush(); err != nil {
		return err
	}
	rawCut, rollCut := now.Add(-s.opts.Raw), now.Add(-s.opts.Retention)
	return s.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(seriesBucket)
		var empty [][]byte
		err := root.ForEachBucket(func(id []byte) error {
			b := root.Bucket(id)
			if err := compactSeries(b, rawCut, rollCut); err != nil {
				return fmt.Errorf("series %s: %w", id, err)
			}
			if isEmpty(b.Bucket(rawBucket)) && isEmpty(b.Bucket(rollBucket)) {
				empty = append(empty, slices.Clone(id))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, id := range empty {
			if err := root.DeleteBucket(id); err != nil {
				return err
			}
		}
		return nil
	})
}

func isEmpty(b *bolt.Bucket) bool {
	if b == nil {
		return true
	}
	k, _ := b.Cursor().First()
	return k == nil
}

func compactSeries(b *bolt.Bucket, rawCut, rollCut time.Time) error {
	if raw := b.Bucket(rawBucket); raw != nil {
		var old []Point
		var keys [][]byte
		c := raw.Cursor()
		for k, v := c.First(); k != nil && keyTime(k).Add(rawChunk).Before(rawCut); k, v = c.Next() {
			ps, err := decodeRaw(keyTime(k), v)
			if err != nil {
				return fmt.Errorf("chunk %v: %w", keyTime(k), err)
			}
			old = append(old, ps...)
			keys = append(keys, slices.Clone(k))
		}
		for _, k := range keys {
			if err := raw.Delete(k); err != nil {
				return err
			}
		}
		if len(old) > 0 {
			roll, err := b.CreateBucketIfNotExists(rollBucket)
			if err != nil {
				return err
			}
			if err := appendRoll(roll, rollup(old)); err != nil {
				return err
			}
		}
	}
	if roll := b.Bucket(rollBucket); roll != nil {
		var keys [][]byte
		c := roll.Cursor()
		for k, _ := c.First(); k != nil && keyTime(k).Add(rollChunk).Before(rollCut); k, _ = c.Next() {
			keys = append(keys, slices.Clone(k))
		}
		for _, k := range keys {
			if err := roll.Delete(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// appendRoll adds minute rollups, in time order, to their hour chunks.
func appendRoll(roll *bolt.Bucket, ps []Point) error {
	for len(ps) > 0 {
		start := ps[0].T.Truncate(rollChunk)
		n := 1
		for n < len(ps) && ps[n].T.Truncate(rollChunk).Equal(start) {
			n++
		}
		key := chunkKey(start, rollChunk)
		old, err := decodeRoll(start, roll.Get(key))
		if err != nil {
			return fmt.Errorf("rollup %v: %w", start, err)
		}
		for _, p := range ps[:n] {
			if k := len(old); k > 0 && old[k-1].T.Equal(p.T) {
				// A minute split between two compactions: merge it.
				o := &old[k-1]
				o.Min, o.Max, o.Last = min(o.Min, p.Min), max(o.Max, p.Max), p.Last
				continue
			}
			old = append(old, p)
		}
		if err := roll.Put(key, encodeRoll(start, old)); err != nil {
			return err
		}
		ps = ps[n:]
	}
	return nil
}

// Range returns id's points from from to to (inclusive), rollups first
// where raw samples are gone, then raw samples, committed or buffered.
func (s *Store) Range(id string, from, to time.Time) ([]Point, error) {
	var out []Point
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(seriesBucket).Bucket([]byte(id))
		if b == nil {
			return nil
		}
		var firstRaw time.Time
		var raws []Point
		if raw := b.Bucket(rawBucket); raw != nil {
			c := raw.Cursor()
			for k, v := c.Seek(chunkKey(from, rawChunk)); k != nil && !keyTime(k).After(to); k, v = c.Next() {
				ps, err := decodeRaw(keyTime(k), v)
				if err != nil {
					return fmt.Errorf("series %s chunk %v: %w", id, keyTime(k), err)
				}
				raws = append(raws, ps...)
			}
			if k, _ := c.First(); k != nil {
				firstRaw = keyTime(k)
			}
		}
		if roll := b.Bucket(rollBucket); roll != nil {
			c := roll.Cursor()
			for k, v := c.Seek(chunkKey(from, rollChunk)); k != nil && !keyTime(k).After(to); k, v = c.Next() {
				ps, err := decodeRoll(keyTime(k), v)
				if err != nil {
					return fmt.Errorf("series %s rollup %v: %w", id, keyTime(k), err)
				}
				for _, p := range ps {
					if !firstRaw.IsZero() && !p.T.Before(firstRaw) {
						break
					}
					out = append(out, p)
				}
			}
		}
		out = append(out, raws...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	out = append(out, s.pending[id]...)
	s.mu.Unlock()
	return slices.DeleteFunc(out, func(p Point) bool { return p.T.Before(from) || p.T.After(to) }), nil
}

// List returns every stored series with its metadata and time span.
func (s *Store) List() ([]Series, error) {
	var out []Series
	err := s.db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(seriesBucket)
		return root.ForEachBucket(func(id []byte) error {
			b := root.Bucket(id)
			sr := Series{ID: string(id), Meta: slices.Clone(b.Get(metaKey))}
			// Rollups are older than raw samples: the first point is the
			// first rollup's, else the first raw one's; the last the other
			// way round.
			for _, t := range []struct {
				name   []byte
				decode func(time.Time, []byte) ([]Point, error)
			}{{rollBucket, decodeRoll}, {rawBucket, decodeRaw}} {
				tier := b.Bucket(t.name)
				if tier == nil {
					continue
				}
				c := tier.Cursor()
				if k, v := c.First(); k != nil && sr.First.IsZero() {
					if ps, err := t.decode(keyTime(k), v); err == nil && len(ps) > 0 {
						sr.First = ps[0].T
					}
				}
				if k, v := c.Last(); k != nil {
					if ps, err := t.decode(keyTime(k), v); err == nil && len(ps) > 0 {
						sr.End = ps[len(ps)-1].T
					}
				}
			}
			out = append(out, sr)
			return nil
		})
	})
	return out, err
}

// Size is the file's size in bytes.
func (s *Store) Size() (int64, error) {
	var size int64
	err := s.db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil })
	return size, err
}
