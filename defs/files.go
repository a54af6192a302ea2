package defs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
