from tests.cli.conftest import _restore_torch_threads, grm, grm_json  # noqa: F401  (the CLI drivers)
