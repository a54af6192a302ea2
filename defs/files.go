package defs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// FindFiles expands paths into the pipeline files they name: a file is taken
// as it is; a directory is searched recursively for *.yaml and *.yml files,
// skipping hidden directories and testdata. The result is sorted and free of
// duplicates. A path that does not exist, or a directory without pipeline
// files, is an error.
func FindFiles(paths []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file or directory: give pipeline files or directories that exist", p)
		}
		if err != nil {
			return nil, fmt.Errorf("pipeline files: %w", err)
		}
		if !info.IsDir() {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
			continue
		}
		n := 0
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != p && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
					return filepath.SkipDir
				}
				return nil
			}
			if ext := filepath.Ext(path); ext == ".yaml" || ext == ".yml" {
				n++
				if !seen[path] {
					seen[path] = true
					out = append(out, path)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("defs: search %s: %w", p, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("defs: no pipeline files (*.yaml, *.yml) in directory %s", p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ParseFiles parses every file and returns the pipelines that could be read
// and all problems of all files, sorted.
func ParseFiles(files []string, opts Options) ([]*Pipeline, Errors) {
	var (
		pls  []*Pipeline
		errs Errors
	)
	for _, f := range files {
		p, es := ParseFile(f, opts)
		if p != nil {
			pls = append(pls, p)
		}
		errs = append(errs, es...)
	}
	errs.Sort()
	return pls, errs
}

// MaxFileSize is the largest pipeline file ReadFile reads.
const MaxFileSize = 16 << 20

// ReadFile reads the pipeline file at path, the one way ax reads one (ax
// validate, ax server's loading and reloads, ax run): only a regular file
// (a symlink is followed to one), of at most MaxFileSize bytes. A named
// pipe, a device (a link to /dev/zero), a socket or a directory is refused
// at once, without waiting for a writer or reading without end.
func ReadFile(path string) ([]byte, error) {
	// O_NONBLOCK: opening a named pipe does not wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s): give pipeline files (*.yaml, *.yml) that are plain files", kindOf(info.Mode()))
	}
	if info.Size() > MaxFileSize {
		return nil, fmt.Errorf("larger than 16 MiB (%d bytes): a pipeline file is at most 16 MiB; split it", info.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("larger than 16 MiB: a pipeline file is at most 16 MiB; split it")
	}
	return data, nil
}

// kindOf names a file mode that is not a regular file's.
func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}
