"""The deploy tests' marker: `grace(seconds)` sets the replicas' `--grace-s` (test_balancer)."""


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "grace(seconds): --grace-s of the replicas behind the balancer")
