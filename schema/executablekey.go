package schema

import "strings"

// KeyKind says what an ExecutableKey is made of.
type KeyKind uint8

const (
	// KeyNone: the executable has neither a GNU build id nor a file id.
	KeyNone KeyKind = iota
	// KeyGNUBuildID: its GNU build id, lower-case hex.
	KeyGNUBuildID
	// KeyFileID: its file id (FileID.Hex).
	KeyFileID
)

// ExecutableKey names an executable to a symbol backend: its GNU build id
// in lower-case hex, else its file id as 32 lower-case hex digits. Parca
// stores uploaded symbols under this key (`<key>/debuginfo`) and names a
// native frame only when the key its profile carries equals the one its
// symbols were uploaded under, so the symbol upload and every profile
// format take the key from here and nowhere else. It is parca-agent's
// choice (GNU, else the file id as BUILD_ID_TYPE_HASH); a Go build id is
// not used, as parca-agent never sends one and it holds '/'.
type ExecutableKey struct {
	// Kind says which identity the key is; KeyNone means no key.
	Kind   KeyKind
	gnu    string
	fileID FileID
}

// KeyOf returns the key of an executable with that GNU build id (hex, any
// case; "" for none) and file id (zero for none).
func KeyOf(gnuBuildID string, fileID FileID) ExecutableKey {
	switch {
	case gnuBuildID != "":
		return ExecutableKey{Kind: KeyGNUBuildID, gnu: gnuBuildID}
	case !fileID.IsZero():
		return ExecutableKey{Kind: KeyFileID, fileID: fileID}
	}
	return ExecutableKey{}
}

// String renders the key ("" for KeyNone). A GNU build id already in
// lower case is returned without copying.
func (k ExecutableKey) String() string {
	switch k.Kind {
	case KeyGNUBuildID:
		return strings.ToLower(k.gnu)
	case KeyFileID:
		return k.fileID.Hex()
	}
	return ""
}
