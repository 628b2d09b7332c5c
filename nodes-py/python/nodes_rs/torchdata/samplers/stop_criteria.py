"""``StopCriteria``: when a mix of sources ends its pass."""


class StopCriteria:
    """When a mix of sources ends its pass.

    - ``CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED`` (default): a source that ends
      starts again, until every source has ended at least once.
    - ``ALL_DATASETS_EXHAUSTED``: every item of every source once.
    - ``FIRST_DATASET_EXHAUSTED``: the pass ends when any source ends.
    - ``CYCLE_FOREVER``: sources start again forever (weighted mix only).

    Under the cycling criteria each rank restarts a source as often as its
    own draws make it; the next pass still starts every source at the same
    epoch on every rank, so sharded, shuffled files stay split among the
    ranks (see ``StopCriteria`` in the Rust docs for the price).
    """

    CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED = "CYCLE_UNTIL_ALL_DATASETS_EXHAUSTED"
    ALL_DATASETS_EXHAUSTED = "ALL_DATASETS_EXHAUSTED"
    FIRST_DATASET_EXHAUSTED = "FIRST_DATASET_EXHAUSTED"
    CYCLE_FOREVER = "CYCLE_FOREVER"
