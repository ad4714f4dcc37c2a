package parcatest

import (
	"encoding/binary"
	"fmt"

	flatbuffers "github.com/google/flatbuffers/go"
)

// Compression returns the IPC body compression of every record and
// dictionary batch of an Arrow IPC stream: "none", "lz4" or "zstd"
// ("mixed" when they differ).
func Compression(stream []byte) (string, error) {
	seen := ""
	for off := 0; off+8 <= len(stream); {
		if binary.LittleEndian.Uint32(stream[off:]) != 0xFFFFFFFF {
			return "", fmt.Errorf("offset %d: no continuation marker", off)
		}
		n := int(binary.LittleEndian.Uint32(stream[off+4:]))
		off += 8
		if n == 0 { // end of stream
			break
		}
		if off+n > len(stream) {
			return "", fmt.Errorf("offset %d: metadata of %d bytes overruns the stream", off, n)
		}
		meta := stream[off : off+n]
		off += n
		msg := table(meta, flatbuffers.GetUOffsetT(meta))
		headerType := byteField(msg, 1)
		bodyLen := int64Field(msg, 3)
		var rb *flatbuffers.Table
		switch headerType {
		case 3: // RecordBatch
			rb = tableField(msg, 2)
		case 2: // DictionaryBatch{id, data: RecordBatch, isDelta}
			if db := tableField(msg, 2); db != nil {
				rb = tableField(db, 1)
			}
		}
		off += int(bodyLen)
		if rb == nil {
			continue
		}
		c := "none"
		if bc := tableField(rb, 3); bc != nil {
			switch byteField(bc, 0) {
			case 0:
				c = "lz4"
			case 1:
				c = "zstd"
			default:
				c = "unknown"
			}
		}
		switch {
		case seen == "":
			seen = c
		case seen != c:
			seen = "mixed"
		}
	}
	if seen == "" {
		seen = "none"
	}
	return seen, nil
}

func table(buf []byte, pos flatbuffers.UOffsetT) *flatbuffers.Table {
	return &flatbuffers.Table{Bytes: buf, Pos: pos}
}

func vt(field int) flatbuffers.VOffsetT { return flatbuffers.VOffsetT(4 + 2*field) }

func byteField(t *flatbuffers.Table, field int) byte {
	if o := t.Offset(vt(field)); o != 0 {
		return t.GetByte(t.Pos + flatbuffers.UOffsetT(o))
	}
	return 0
}

func int64Field(t *flatbuffers.Table, field int) int64 {
	if o := t.Offset(vt(field)); o != 0 {
		return t.GetInt64(t.Pos + flatbuffers.UOffsetT(o))
	}
	return 0
}

func tableField(t *flatbuffers.Table, field int) *flatbuffers.Table {
	if o := t.Offset(vt(field)); o != 0 {
		return table(t.Bytes, t.Indirect(t.Pos+flatbuffers.UOffsetT(o)))
	}
	return nil
}
