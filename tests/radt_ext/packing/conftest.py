from tests.radt_ext.collocation.support import standins  # noqa: F401  (fixture)
