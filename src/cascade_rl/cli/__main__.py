"""``python -m cascade_rl.cli``: the ``cascade`` command (e.g. ``accelerate launch -m cascade_rl.cli run ...``)."""

from cascade_rl.cli import main

main()
