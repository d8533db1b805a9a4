"""Transactions (KIP-98, KIP-447, KIP-890): one TransactionManager per transactional producer.

- ``manager.py``: the TransactionManager, the coordinator operations as tasks and their errors;
- ``states.py``: the state machine and the gate it holds over the accumulator's ``send``;
- ``coordinator.py``: the requests to the transaction and group coordinators, and their retries;
- ``epoch.py``: the producer id and epoch, and the step between two transactions;
- ``version.py``: which transaction protocol (v1 or v2) the cluster speaks;
- ``face.py``: the producer's public transactional calls (a base class of the asyncio producer);
- ``prepared.py``: prepared transactions, completed by another process (two-phase commit).

The package re-exports what the module ``kafka_core.producer.transactions`` exported before it
was split.
"""

from kafka_core.producer.transactions.manager import TransactionManager
from kafka_core.producer.transactions.states import TransactionState

__all__ = ["TransactionManager", "TransactionState"]
