"""The consumer's group memberships, one per group protocol, behind one interface.

- ``classic.py``: the classic protocol (JoinGroup/SyncGroup/Heartbeat), with the assignment
  made by the group leader: ``classic_leader.py`` runs ``assignors.py`` over the members'
  subscriptions, carried in the embedded structs of ``classic_meta.py``.
- ``kip848.py``: the KIP-848 protocol (ConsumerGroupHeartbeat), the broker assigns; its target
  assignment is brought in by ``kip848_reconcile.py``.
- ``rebalance.py``: what the consumer asks of a membership (Membership), what it tells the consumer (RebalanceListener,
  ConsumerGroupMetadata), and the consumer's side of a rebalance.
"""
