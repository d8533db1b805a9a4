"""What the consumer (``kafka_core.consumer``) and the share consumer (``kafka_core.share``)
both build on, below either of them: the client they run over and the options they share
(``options.py``), how long they have been cut off from the cluster (``outage.py``), a
heartbeat member's id (``member.py``) and the error a key or value deserializer leads to
(``deserialize.py``). Nothing here imports either consumer.
"""
