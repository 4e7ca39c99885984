"""BrokerHeartbeatManager: R23 session liveness, R24 expiry, R37 shutdown readiness."""
from broker.protocol.heartbeats import BrokerHeartbeatManager


def test_r24_session_expires_exactly_after_session_timeout():
    """R24: fenced when no heartbeat arrived for session_timeout; each heartbeat renews it."""
    sessions = BrokerHeartbeatManager(session_timeout=2.0)
    sessions.touch(1, 0.0)
    sessions.touch(2, 1.0)
    assert sessions.expired(1.99) == [] and sessions.is_live(1, 1.99)
    assert sessions.expired(2.0) == [1]
    sessions.touch(1, 2.5)
    assert sessions.expired(3.0) == [2]
    sessions.end_session(2)
    assert not sessions.has_session(2) and not sessions.is_live(2, 3.0) and sessions.expired(3.0) == []


def test_r37_may_shut_down_once_active_brokers_applied_the_shutdown_records():
    """R37: the broker may stop only when every other active broker reported the shutdown offset."""
    sessions = BrokerHeartbeatManager(session_timeout=2.0)
    for broker in (1, 2, 3):
        sessions.touch(broker, 0.0, metadata_offset=10)
    assert not sessions.may_shut_down(1, [1, 2, 3])  # never asked
    sessions.begin_controlled_shutdown(1, 12)
    assert not sessions.may_shut_down(1, [1, 2, 3])
    sessions.touch(2, 0.1, metadata_offset=12)
    assert not sessions.may_shut_down(1, [1, 2, 3])
    sessions.touch(3, 0.1, metadata_offset=15)
    sessions.touch(3, 0.2, metadata_offset=11)  # a stale report never moves a broker backwards
    assert sessions.may_shut_down(1, [1, 2, 3])
