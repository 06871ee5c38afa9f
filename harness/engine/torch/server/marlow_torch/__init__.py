"""marlow's torch engine server.

The Go client (package harness/engine/torch) writes this package into a
cache folder and starts it once per run (`python FOLDER/marlow_torch`, or
`python -m marlow_torch` with the package on the path); it speaks the
protocol of protocol.py over two dedicated pipes passed as extra file
descriptors: requests arrive on --in-fd, replies leave on --out-fd.

Python's stdout is redirected to stderr at start (also at the file
descriptor level), so prints from libraries can never corrupt the
protocol; the client keeps the tail of stderr for its error messages.

The semantics mirror marlow's native engine (harness/engine/native): the
keyed random streams (keyed.py; native rng.go), the LoRA initialisation
(adapters.py; adapter.go), the inverse-CDF sampling in float64
(sampling.py; generate.go), the GRPO train step with per-agent gradient
buffers and AdamW (training.py, turns.py; grpo.go, adapter.go) and the
on-disk adapter layout (checkpoints.py; io.go).
"""
