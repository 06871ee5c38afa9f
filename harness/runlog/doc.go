// Package runlog writes and reads a run's logs: the Arrow schemas of the run
// tables (steps, evals, samples, timing), crash-safe Parquet segments
// compressed with zstd, the run manifest, readers over run folders and
// archives, a checker that lists every problem found, and a deterministic
// .tar.zst archive of a runs tree.
//
// A run directory holds manifest.json and one folder per table. Rows are
// buffered in memory until the caller commits a step (its checkpoint
// boundary); each table's buffered rows are then written to a temporary
// file, fsynced and renamed to a segment named after the committed step
// (steps/000012.parquet), and only then is the manifest's last committed step
// advanced, together with the manifest's inventory of every committed
// segment and checkpoint file (bytes and SHA-256), which the readers, Check
// and VerifyRun compare the files with. Reopening a run removes everything
// past that step, so a resumed run regenerates the same segment names and
// bytes.
//
// Wall-clock seconds live in their own table (timing/) so that steps/,
// evals/ and samples/ are byte-identical for the same commit, spec and seed.
// The column reference is SCHEMA.md, generated from the definitions in
// schema.go.
package runlog

//go:generate go test -run TestSchemaDoc -update .
