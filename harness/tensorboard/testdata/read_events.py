"""Read TensorBoard event folders with the tensorboard package and print
every scalar as JSON: {run: {tag: [[step, value, wall_time], ...]}}."""

import json
import sys

from tensorboard.backend.event_processing import event_accumulator


def main(dirs: list[str]) -> None:
    out: dict[str, dict[str, list[list[float]]]] = {}
    for d in dirs:
        acc = event_accumulator.EventAccumulator(
            d, size_guidance={event_accumulator.SCALARS: 0}
        )
        acc.Reload()
        out[d] = {
            tag: [[e.step, e.value, e.wall_time] for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
