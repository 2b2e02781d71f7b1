"""The deploy tests' marker: `fleet(replicas, grace_s)` sets how many replicas stand behind
the balancer and their `--grace-s` (test_balancer)."""


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "fleet(replicas, grace_s): the replicas behind the balancer and their --grace-s")
