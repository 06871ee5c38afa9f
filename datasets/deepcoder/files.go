package deepcoder

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// The published layout of agentica-org/DeepCoder-Preview-Dataset: one
// folder per subset at the dataset root, each holding Parquet shards named
// <split>-NNNNN-of-MMMMM.parquet. lcbv5 has train and test shards,
// primeintellect and taco train shards only, codeforces test shards only.
var Subsets = []string{"lcbv5", "primeintellect", "taco", "codeforces"}

// Splits of the published shards.
const (
	SplitTrain = "train"
	SplitTest  = "test"
)

// Shards lists the Parquet shards of one split under path, in a fixed
// order:
//   - a file: that file (subsets must be empty);
//   - a dataset root (a folder holding subset folders): the <split>-*.parquet
//     shards of the chosen subsets, subsets in the published order
//     (Subsets) and shards in name order; no subsets chosen means every
//     subset folder that holds shards of the split;
//   - any other folder (subsets must be empty): its <split>-*.parquet
//     shards when some file there is named train-* or test-*, else all its
//     *.parquet files, in name order.
func Shards(path string, subsets []string, split string) ([]string, error) {
	if split != SplitTrain && split != SplitTest {
		return nil, fmt.Errorf("deepcoder: unknown split %q (want %q or %q)", split, SplitTrain, SplitTest)
	}
	for _, s := range subsets {
		if !slices.Contains(Subsets, s) {
			return nil, fmt.Errorf("deepcoder: unknown subset %q (want one of %s)", s, strings.Join(Subsets, ", "))
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("deepcoder: %w", err)
	}
	if !st.IsDir() {
		if len(subsets) > 0 {
			return nil, fmt.Errorf("deepcoder: %s is a file; subsets choose folders of the dataset root", path)
		}
		return []string{path}, nil
	}
	var present []string
	for _, s := range Subsets {
		if fi, err := os.Stat(filepath.Join(path, s)); err == nil && fi.IsDir() {
			present = append(present, s)
		}
	}
	if len(present) == 0 {
		if len(subsets) > 0 {
			return nil, fmt.Errorf("deepcoder: %s is not a dataset root (it has no %s folder); subsets need one", path, strings.Join(Subsets, ", "))
		}
		return folderShards(path, split)
	}
	var out []string
	for _, s := range Subsets {
		chosen := slices.Contains(subsets, s)
		if len(subsets) > 0 && !chosen {
			continue
		}
		if !slices.Contains(present, s) {
			return nil, fmt.Errorf("deepcoder: subset %s: no folder %s", s, filepath.Join(path, s))
		}
		files, err := splitFiles(filepath.Join(path, s), split)
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			if chosen {
				return nil, fmt.Errorf("deepcoder: subset %s has no %s-*.parquet shards in %s", s, split, filepath.Join(path, s))
			}
			continue
		}
		out = append(out, files...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("deepcoder: no subset folder of %s holds %s-*.parquet shards", path, split)
	}
	return out, nil
}

// folderShards lists the shards of one split in a plain folder.
func folderShards(dir, split string) ([]string, error) {
	all, err := parquetFiles(dir)
	if err != nil {
		return nil, err
	}
	named := false
	for _, f := range all {
		b := filepath.Base(f)
		named = named || strings.HasPrefix(b, SplitTrain+"-") || strings.HasPrefix(b, SplitTest+"-")
	}
	if !named {
		if len(all) == 0 {
			return nil, fmt.Errorf("deepcoder: folder %s holds no .parquet shards", dir)
		}
		return all, nil
	}
	files, err := splitFiles(dir, split)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("deepcoder: folder %s holds no %s-*.parquet shards", dir, split)
	}
	return files, nil
}

// splitFiles lists dir's <split>-*.parquet files in name order.
func splitFiles(dir, split string) ([]string, error) {
	all, err := parquetFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range all {
		if strings.HasPrefix(filepath.Base(f), split+"-") {
			out = append(out, f)
		}
	}
	return out, nil
}

// parquetFiles lists dir's *.parquet files in name order.
func parquetFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("deepcoder: %w", err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".parquet") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}
