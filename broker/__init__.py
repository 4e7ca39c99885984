"""The system under test: broker and controller nodes of a Kafka-style replication protocol."""
