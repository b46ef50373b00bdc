"""ContainerManager's settings (server/writes/containers.py) read as ZooKeeperServerMain
reads them: ``Integer.getInteger`` twice, ``Long.getLong`` once."""

from __future__ import annotations

from trizk.server.writes.containers import ContainerSettings


def test_defaults() -> None:
    assert ContainerSettings.from_properties({}) == ContainerSettings(60_000, 10_000, 0)


def test_values_are_decoded_as_java_does() -> None:
    s = ContainerSettings.from_properties(
        {
            "znode.container.checkIntervalMs": "0x3e8",
            "znode.container.maxPerMinute": "010",
            "znode.container.maxNeverUsedIntervalMs": "4294967296",
        }
    )
    assert s == ContainerSettings(1000, 8, 2**32)


def test_malformed_or_out_of_range_values_are_the_defaults() -> None:
    s = ContainerSettings.from_properties(
        {
            "znode.container.checkIntervalMs": "1_000",
            "znode.container.maxPerMinute": "2147483648",
            "znode.container.maxNeverUsedIntervalMs": " 5",
        }
    )
    assert s == ContainerSettings()
