package dataset

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KeyConvention says how a dataset's keys relate to its slots (see
// docs/sidecar.md).
type KeyConvention int

const (
	// KeysUnknown: nothing records it.
	KeysUnknown KeyConvention = iota
	// KeysSlotLocal: each slot's keys are in [0, size_s); a reader must add
	// the slot offsets (Σ earlier sizes) for slots not to share ids —
	// HugeCTR's convention for Raw and Parquet (slot_size_array).
	KeysSlotLocal
	// KeysGlobal: slot s's keys are in [P_s, P_s + size_s), the offsets
	// already added — HugeCTR's convention for Norm.
	KeysGlobal
)

// String is the name the sidecar's key_convention holds.
func (k KeyConvention) String() string {
	switch k {
	case KeysSlotLocal:
		return "slot_local"
	case KeysGlobal:
		return "global"
	}
	return "unknown"
}

// Phrase is the convention in words for messages.
func (k KeyConvention) Phrase() string {
	switch k {
	case KeysSlotLocal:
		return "slot-local (each slot's keys from 0)"
	case KeysGlobal:
		return "global (slot offsets already added)"
	}
	return "of an unknown convention"
}

// DefaultKeys is the convention ctrkit writes (gen and convert alike) for
// an output format when nothing asks otherwise: HugeCTR's, global keys for
// Norm (its reader adds no offsets), slot-local keys with the slot sizes
// for Raw, Parquet and Criteo text.
func DefaultKeys(f Format) KeyConvention {
	if f == Norm {
		return KeysGlobal
	}
	return KeysSlotLocal
}

// KeyInfoName is the sidecar ctrkit writes beside a dataset: in its
// directory (Norm, Parquet) or as "<file>.slot_size_array.json" (Raw).
// HugeCTR reads no such file; its slot_size_array is the form HugeCTR
// configs use.
const KeyInfoName = "slot_size_array.json"

// genParamsName is gen's record of its parameters (datagen.ParamsFile),
// which holds the slot sizes and the format (and so the convention).
const genParamsName = "gen_params.json"

// KeyInfo is what a dataset's sidecar records about its keys.
type KeyInfo struct {
	SlotSizeArray []int64
	Keys          KeyConvention
	// File is the sidecar read.
	File string
}

type keyInfoJSON struct {
	SlotSizeArray []int64 `json:"slot_size_array"`
	KeyConvention string  `json:"key_convention,omitempty"`
}

// KeyInfoJSON is the sidecar's text: {"slot_size_array": [...],
// "key_convention": "slot_local" | "global"}.
func KeyInfoJSON(sizes []int64, keys KeyConvention) ([]byte, error) {
	if sizes == nil {
		sizes = []int64{}
	}
	v := keyInfoJSON{SlotSizeArray: sizes}
	if keys != KeysUnknown {
		v.KeyConvention = keys.String()
	}
	data, err := json.Marshal(v)
	return append(data, '\n'), err
}

// ReadKeyInfo reads a sidecar: a slot_size_array.json (with or without a
// key_convention; HugeCTR-style files have none) or gen's gen_params.json
// (whose format decides the convention).
func ReadKeyInfo(path string) (KeyInfo, error) {
	ki := KeyInfo{File: path}
	data, err := os.ReadFile(path)
	if err != nil {
		return ki, err
	}
	var v struct {
		SlotSizeArray *[]int64 `json:"slot_size_array"`
		KeyConvention string   `json:"key_convention"`
		Format        string   `json:"format"` // gen_params.json
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return ki, fmt.Errorf("%s: not a slot-size file: %v", path, err)
	}
	if v.SlotSizeArray == nil {
		return ki, fmt.Errorf(`%s: no "slot_size_array" key (want {"slot_size_array": [n0, n1, ...]})`, path)
	}
	for i, n := range *v.SlotSizeArray {
		if n <= 0 {
			return ki, fmt.Errorf("%s: slot_size_array[%d] is %d; slot sizes must be > 0", path, i, n)
		}
	}
	ki.SlotSizeArray = *v.SlotSizeArray
	switch v.KeyConvention {
	case "slot_local":
		ki.Keys = KeysSlotLocal
	case "global":
		ki.Keys = KeysGlobal
	case "":
		if strings.HasSuffix(filepath.Base(path), genParamsName) && v.Format != "" {
			ki.Keys = KeysSlotLocal
			if strings.EqualFold(v.Format, "norm") {
				ki.Keys = KeysGlobal
			}
		}
	default:
		return ki, fmt.Errorf(`%s: key_convention %q (want "slot_local" or "global")`, path, v.KeyConvention)
	}
	return ki, nil
}

// FindKeyInfo reads the sidecar of the dataset whose file list is list
// ("" for one data file) and whose first data file is first: the
// list's directory's slot_size_array.json or gen_params.json, or for a
// single file "<file>.slot_size_array.json", else its directory's
// gen_params.json when that run wrote this file. ok is false when there is
// none; a sidecar that exists but does not parse is an error.
func FindKeyInfo(list, first string) (ki KeyInfo, ok bool, err error) {
	var cands []string
	if list != "" {
		dir := filepath.Dir(list)
		cands = []string{filepath.Join(dir, KeyInfoName), filepath.Join(dir, genParamsName)}
	} else if first != "" {
		cands = []string{first + "." + KeyInfoName, filepath.Join(filepath.Dir(first), KeyInfoName)}
		// gen's record of the run that wrote this file: "<train
		// file>.gen_params.json" beside a Raw file (the eval file's run
		// names it in its files), or an older directory-wide one.
		recs, _ := filepath.Glob(filepath.Join(filepath.Dir(first), "*."+genParamsName))
		for _, r := range append(recs, filepath.Join(filepath.Dir(first), genParamsName)) {
			if genWrote(r, first) {
				cands = append(cands, r)
				break
			}
		}
	}
	for _, c := range cands {
		if _, serr := os.Stat(c); serr != nil {
			continue
		}
		ki, err = ReadKeyInfo(c)
		if err != nil {
			return ki, false, fmt.Errorf("the dataset's sidecar: %w", err)
		}
		return ki, true, nil
	}
	return ki, false, nil
}

// genWrote reports whether gen's record at params lists file among the
// files it wrote.
func genWrote(params, file string) bool {
	data, err := os.ReadFile(params)
	if err != nil {
		return false
	}
	var v struct {
		Files []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	if json.Unmarshal(data, &v) != nil {
		return false
	}
	for _, f := range v.Files {
		if filepath.Base(f.Path) == filepath.Base(file) {
			return true
		}
	}
	return false
}

// errNoKeyInfo is returned by SlotSizesFromFile for a file without slot
// sizes.
var errNoKeyInfo = errors.New("no slot sizes")

// SlotSizesFromFile reads the slot sizes of a --slot-size-array @FILE
// value: a sidecar (ReadKeyInfo), a dataset directory or file list (its
// sidecar), or a Raw file (its "<file>.slot_size_array.json").
func SlotSizesFromFile(path string) ([]int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() || !strings.HasSuffix(strings.ToLower(path), ".json") {
		list, first := "", path
		if st.IsDir() {
			list, first = filepath.Join(path, "file_list.txt"), ""
		} else if head, err := ReadHead(path, 4096); err == nil && LooksLikeFileList(head) {
			list, first = path, ""
		}
		ki, ok, err := FindKeyInfo(list, first)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%s: %w: no %s or %s beside it", path, errNoKeyInfo, KeyInfoName, genParamsName)
		}
		return ki.SlotSizeArray, nil
	}
	ki, err := ReadKeyInfo(path)
	return ki.SlotSizeArray, err
}
