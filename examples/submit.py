"""Entry point for spark-submit: `spark-submit --master URL examples/submit.py run pipeline.yaml`.
The master comes from spark-submit; panes does not override it."""

from panes.cli import main

if __name__ == "__main__":
    main()
