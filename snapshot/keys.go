package snapshot

// key is a dict key the model knows. Dicts are classified by which keys
// they hold, never by key order (which differs between the Python and C++
// writers) or by their position in the file.
type key uint8

const (
	kUnknown key = iota
	kAction
	kAddr
	kSize
	kStream
	kTimeUS
	kCompileContext
	kUserMetadata
	kFrames
	kDeviceFree
	kFilename
	kLine
	kName
	kAddress
	kRequestedSize
	kState
	kTotalSize
	kAllocatedSize
	kActiveSize
	kDevice
	kSegmentType
	kSegmentPoolID
	kIsExpandable
	kBlocks
	kStage
	kHistory
	kRealSize
	kCppFrames
	kSegments
	kDeviceTraces
	kAllocatorSettings
	kExternalAnnotations
	numKeys
)

var keyNames = [numKeys]string{
	"", "action", "addr", "size", "stream", "time_us", "compile_context", "user_metadata",
	"frames", "device_free", "filename", "line", "name", "address", "requested_size", "state",
	"total_size", "allocated_size", "active_size", "device", "segment_type", "segment_pool_id",
	"is_expandable", "blocks", "stage", "history", "real_size", "cpp_frames", "segments",
	"device_traces", "allocator_settings", "external_annotations",
}

var keyByName = func() map[string]key {
	m := make(map[string]key, numKeys)
	for k := key(1); k < numKeys; k++ {
		m[keyNames[k]] = k
	}
	return m
}()

// keySet is a bitmask of keys.
type keySet uint64

func (s keySet) has(k key) bool { return s&(1<<k) != 0 }
