package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

// A snapshot is one committed unit: HugeCTR's files under HugeCTR's names
// (so HugeCTR reads them) plus a manifest, <prefix>_snapshot_<iter>.json,
// listing every file with its size and CRC-32C. Save first replaces the
// manifest with one marked incomplete, then writes each file under a
// temporary name, syncs and renames it, syncs the directories, and last
// writes the complete manifest (synced, renamed, directory synced). A run
// killed at any moment leaves either the complete unit or a manifest that
// says incomplete, which LoadSnapshot refuses by name. Files without a
// manifest are HugeCTR's own and load with a note.

// manifestVersion is the "ctrkit_snapshot" value of the manifests Save
// writes.
const manifestVersion = 1

// ManifestFile is the name of the manifest of the snapshot of prefix at
// iter.
func ManifestFile(prefix string, iter int64) string {
	return fmt.Sprintf("%s_snapshot_%d.json", prefix, iter)
}

// manifest is the JSON of a manifest file.
type manifest struct {
	Version  int            `json:"ctrkit_snapshot"`
	Complete bool           `json:"complete"`
	Iter     int64          `json:"iter"`
	Opt      string         `json:"optimizer,omitempty"`
	Update   string         `json:"update_type,omitempty"`
	Files    []manifestFile `json:"files"`
}

// manifestFile is one file of a snapshot: its path relative to the
// manifest's directory, size in bytes and CRC-32C (Castagnoli), hex.
type manifestFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	CRC32C string `json:"crc32c"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crcHex(data []byte) string { return fmt.Sprintf("%08x", crc32.Checksum(data, castagnoli)) }

// recorder writes snapshot files durably and, when not nil, records them
// for the manifest.
type recorder struct {
	base  string // the manifest's directory
	files []manifestFile
}

func (r *recorder) add(path string, data []byte) {
	if r == nil {
		return
	}
	rel, err := filepath.Rel(r.base, path)
	if err != nil {
		rel = path
	}
	r.files = append(r.files, manifestFile{Name: filepath.ToSlash(rel), Size: int64(len(data)), CRC32C: crcHex(data)})
}

// write writes data to path through a synced temporary file renamed into
// place.
func (r *recorder) write(path string, data []byte) error {
	if err := writeDurable(path, data); err != nil {
		return err
	}
	r.add(path, data)
	return nil
}

// writeDir builds directory dir under a temporary name (its files synced,
// then the directory), then renames it into place, replacing an older one,
// and syncs the parent.
func (r *recorder) writeDir(dir string, files map[string][]byte) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return err
	}
	fail := func(err error) error { os.RemoveAll(tmp); return err }
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := writeSynced(filepath.Join(tmp, name), files[name]); err != nil {
			return fail(err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fail(err)
	}
	if err := atomicfile.SyncDir(tmp); err != nil {
		return fail(err)
	}
	if _, err := os.Lstat(dir); err == nil {
		old := tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			return fail(err)
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fail(err)
	}
	if err := atomicfile.SyncDir(parent); err != nil {
		return err
	}
	for _, name := range names {
		r.add(filepath.Join(dir, name), files[name])
	}
	return nil
}

// writeSynced creates path with data and syncs it.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeDurable writes path through a temporary file; formats' Commit syncs
// the file before the rename and the directory after it.
func writeDurable(path string, data []byte) error {
	return atomicfile.WriteFile(path, data)
}

func (m *Model) writeManifest(path string, mf manifest) error {
	b, err := json.MarshalIndent(mf, "", "  ")
	if err != nil {
		return err
	}
	return writeDurable(path, append(b, '\n'))
}

// Save writes the model and optimizer state as HugeCTR's
// save_params_to_files(prefix, iter) does, as one committed unit with its
// manifest (see ManifestFile). In a group every rank calls it: rank 0
// writes the files, the others send it their rows (parallel_files.go), and
// every rank returns an error when any rank failed.
func (m *Model) Save(prefix string, iter int64) error {
	mpath := ManifestFile(prefix, iter)
	mf := manifest{Version: manifestVersion, Iter: iter, Opt: m.optCfg.Type, Update: m.optCfg.UpdateType}
	var rec *recorder
	var err error
	if m.leads() {
		if err = m.writeManifest(mpath, mf); err != nil {
			err = fmt.Errorf("writing snapshot manifest: %w", err)
		}
		rec = &recorder{base: filepath.Dir(mpath)}
	}
	if err := m.agree(err); err != nil {
		return err
	}
	if err := m.saveFiles(SnapshotFiles(prefix, iter, len(m.embs)), rec); err != nil {
		return err
	}
	if m.leads() {
		mf.Complete, mf.Files = true, rec.files
		if err = m.writeManifest(mpath, mf); err != nil {
			err = fmt.Errorf("writing snapshot manifest: %w", err)
		}
	}
	return m.agree(err)
}

// LoadOptions configure LoadSnapshot.
type LoadOptions struct {
	// FreshOptimizer starts the optimizer state fresh (zero moments): the
	// optimizer files are neither required nor read. The iteration count
	// and the learning-rate schedule still continue from the snapshot's.
	FreshOptimizer bool
	// WeightsOnly loads the model for evaluation or prediction: no
	// optimizer files, and the iteration count is not restored.
	WeightsOnly bool
	// Log receives one-line notes (files without a manifest); nil: none.
	Log io.Writer
	// sizesOnly checks the manifest's sizes but not its checksums: the
	// other ranks of a process whose first rank checks them (trainGroup;
	// a mismatch there fails the whole group's start).
	sizesOnly bool
}

// SnapshotError is a snapshot that is incomplete or does not match its
// manifest; Path names the file at fault.
type SnapshotError struct {
	Path   string
	Detail string
}

func (e *SnapshotError) Error() string { return e.Path + ": " + e.Detail }

// Load is LoadSnapshot with default options: everything, optimizer state
// included, must be there.
func (m *Model) Load(prefix string, iter int64) error {
	return m.LoadSnapshot(prefix, iter, LoadOptions{})
}

// LoadSnapshot loads the snapshot of prefix at iter and, unless
// WeightsOnly, continues the model's iteration count (and so the
// learning-rate schedule and dropout stream) from iter. With a manifest,
// every file it lists must be there with its size and checksum, and it must
// list every file the model reads; without one (HugeCTR's own files) the
// files must exist and fit the model, and a note says no checksums were
// checked. A missing optimizer file is refused unless FreshOptimizer.
func (m *Model) LoadSnapshot(prefix string, iter int64, o LoadOptions) error {
	f := SnapshotFiles(prefix, iter, len(m.embs))
	fresh := o.FreshOptimizer || o.WeightsOnly
	if fresh {
		f.DenseOpt, f.SparseOpt = "", nil
	}
	need := m.neededFiles(f)
	mpath := ManifestFile(prefix, iter)
	data, err := os.ReadFile(mpath)
	switch {
	case err == nil:
		if err := m.checkManifest(mpath, data, iter, need, fresh, o.sizesOnly); err != nil {
			return err
		}
	case errors.Is(err, fs.ErrNotExist):
		var missing []string
		for _, p := range need {
			if _, err := os.Stat(p); err != nil {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			hint := ""
			if !fresh && m.onlyOptimizer(missing, f) {
				hint = " (to start the optimizer state fresh, load with --load-optimizer=false)"
			}
			return &SnapshotError{missing[0], fmt.Sprintf("missing from the snapshot at iteration %d: %s%s", iter, strings.Join(missing, ", "), hint)}
		}
		if o.Log != nil {
			fmt.Fprintf(o.Log, "note: %s has no manifest (HugeCTR's own files): sizes checked, no checksums\n", mpath)
		}
	default:
		return err
	}
	if err := m.LoadFiles(f); err != nil {
		return err
	}
	if !o.WeightsOnly {
		m.iter = uint64(iter)
		for _, opt := range m.optimizers() {
			opt.SetStep(iter)
		}
	}
	return m.be.Sync()
}

// onlyOptimizer reports whether every missing path is an optimizer file.
func (m *Model) onlyOptimizer(missing []string, f Files) bool {
	opt := map[string]bool{f.DenseOpt: true}
	for _, p := range f.SparseOpt {
		opt[p] = true
	}
	for _, p := range missing {
		if !opt[p] {
			return false
		}
	}
	return true
}

// neededFiles lists every file LoadFiles(f) reads.
func (m *Model) neededFiles(f Files) []string {
	var need []string
	if f.Dense != "" {
		need = append(need, f.Dense)
		if len(m.batchNorms()) > 0 {
			need = append(need, NTPFile(f.Dense))
		}
	}
	if f.DenseOpt != "" {
		need = append(need, f.DenseOpt)
	}
	for i, e := range m.embs {
		if i < len(f.Sparse) && f.Sparse[i] != "" {
			need = append(need, filepath.Join(f.Sparse[i], "key"), filepath.Join(f.Sparse[i], "emb_vector"))
			if localized(e) {
				need = append(need, filepath.Join(f.Sparse[i], "slot_id"))
			}
		}
		if i < len(f.SparseOpt) && f.SparseOpt[i] != "" {
			need = append(need, f.SparseOpt[i])
		}
	}
	return need
}

// checkManifest verifies a snapshot against its manifest.
func (m *Model) checkManifest(mpath string, data []byte, iter int64, need []string, fresh, sizesOnly bool) error {
	var mf manifest
	if err := json.Unmarshal(data, &mf); err != nil || mf.Version == 0 {
		return &SnapshotError{mpath, fmt.Sprintf("not a ctrkit snapshot manifest (%v)", err)}
	}
	if mf.Version > manifestVersion {
		return &SnapshotError{mpath, fmt.Sprintf("manifest version %d, this ctrkit reads %d", mf.Version, manifestVersion)}
	}
	if !mf.Complete {
		return &SnapshotError{mpath, fmt.Sprintf("the snapshot at iteration %d is incomplete: its save, or its removal by --keep-snapshots, was interrupted", mf.Iter)}
	}
	if mf.Iter != iter {
		return &SnapshotError{mpath, fmt.Sprintf("manifest of iteration %d, want %d", mf.Iter, iter)}
	}
	if !fresh && (mf.Opt != m.optCfg.Type || mf.Update != m.optCfg.UpdateType) {
		return &SnapshotError{mpath, fmt.Sprintf("optimizer state of %s (%s), the model trains with %s (%s); start it fresh with --load-optimizer=false",
			mf.Opt, mf.Update, m.optCfg.Type, m.optCfg.UpdateType)}
	}
	base := filepath.Dir(mpath)
	listed := map[string]manifestFile{}
	for _, e := range mf.Files {
		listed[filepath.Clean(filepath.Join(base, filepath.FromSlash(e.Name)))] = e
	}
	for _, p := range need {
		e, ok := listed[filepath.Clean(p)]
		if !ok {
			return &SnapshotError{p, fmt.Sprintf("not in the snapshot's manifest %s", mpath)}
		}
		st, err := os.Stat(p)
		if err != nil {
			return &SnapshotError{p, fmt.Sprintf("missing from the snapshot at iteration %d (listed in %s)", iter, mpath)}
		}
		if st.Size() != e.Size {
			return &SnapshotError{p, fmt.Sprintf("%d bytes, the manifest %s says %d", st.Size(), mpath, e.Size)}
		}
		if sizesOnly {
			continue
		}
		d, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if c := crcHex(d); c != e.CRC32C {
			return &SnapshotError{p, fmt.Sprintf("CRC-32C %s, the manifest %s says %s: the file is not the one this snapshot wrote", c, mpath, e.CRC32C)}
		}
	}
	return nil
}

// snapshotIters lists the iterations of the manifests of prefix, with
// whether each is complete.
func snapshotIters(prefix string) (map[int64]bool, error) {
	dir, base := filepath.Split(prefix + "_")
	base = strings.TrimSuffix(base, "_")
	if dir == "" {
		dir = "."
	}
	re := regexp.MustCompile("^" + regexp.QuoteMeta(base) + `_snapshot_([0-9]+)\.json$`)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[int64]bool{}
	for _, e := range ents {
		sm := re.FindStringSubmatch(e.Name())
		if sm == nil {
			continue
		}
		it, err := strconv.ParseInt(sm[1], 10, 64)
		if err != nil {
			continue
		}
		var mf manifest
		d, err := os.ReadFile(filepath.Join(dir, e.Name()))
		out[it] = err == nil && json.Unmarshal(d, &mf) == nil && mf.Complete && mf.Iter == it
	}
	return out, nil
}

// PruneSnapshots keeps the newest keep complete snapshots of prefix (those
// with a manifest) and deletes the older ones, and incomplete ones older
// than the newest complete one; keep ≤ 0 keeps all (in a group, rank 0
// prunes; the others do nothing). A snapshot is marked
// incomplete before its files go, so an interrupted prune leaves nothing
// that loads half.
func (m *Model) PruneSnapshots(prefix string, keep int) error {
	if keep <= 0 || !m.leads() {
		return nil
	}
	iters, err := snapshotIters(prefix)
	if err != nil {
		return err
	}
	var done []int64
	for it, ok := range iters {
		if ok {
			done = append(done, it)
		}
	}
	sort.Slice(done, func(a, b int) bool { return done[a] > done[b] })
	if len(done) == 0 {
		return nil
	}
	keepSet := map[int64]bool{}
	for _, it := range done[:min(keep, len(done))] {
		keepSet[it] = true
	}
	for it := range iters {
		if keepSet[it] || it > done[0] {
			continue
		}
		if err := m.removeSnapshot(prefix, it); err != nil {
			return err
		}
	}
	return nil
}

func (m *Model) removeSnapshot(prefix string, iter int64) error {
	mpath := ManifestFile(prefix, iter)
	f := SnapshotFiles(prefix, iter, len(m.embs))
	paths := append([]string{f.Dense, NTPFile(f.Dense), f.DenseOpt}, f.Sparse...)
	// The files the manifest lists too (a model with more embeddings may
	// have written the snapshot): the top entry of each name.
	var old manifest
	if d, err := os.ReadFile(mpath); err == nil && json.Unmarshal(d, &old) == nil {
		base := filepath.Dir(mpath)
		stem := strings.TrimSuffix(filepath.Base(prefix+"_"), "_") // the prefix's file part
		for _, e := range old.Files {
			top, _, _ := strings.Cut(e.Name, "/")
			if strings.HasPrefix(top, stem) && top != "" && top != "." && top != ".." {
				paths = append(paths, filepath.Join(base, top))
			}
		}
	}
	if err := m.writeManifest(mpath, manifest{Version: manifestVersion, Iter: iter}); err != nil {
		return err
	}
	for _, p := range append(paths, f.SparseOpt...) {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
		removeTemps(p)
	}
	if err := atomicfile.SyncDir(filepath.Dir(mpath)); err != nil {
		return err
	}
	if err := os.Remove(mpath); err != nil {
		return err
	}
	removeTemps(mpath)
	return nil
}

// removeTemps deletes what killed saves left of path: the temporary names
// (".<base>.tmp-…") they wrote it under.
func removeTemps(path string) {
	tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "."+escapeGlob(filepath.Base(path))+".tmp-*"))
	for _, t := range tmps {
		os.RemoveAll(t)
	}
}

func escapeGlob(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`).Replace(s)
}
