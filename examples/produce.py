"""Produce N records to a topic (created with 6 partitions if missing).

.venv/bin/python examples/produce.py [--bootstrap 127.0.0.1:9092] [--topic demo] [-n 1000]
"""

import argparse

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

args = argparse.ArgumentParser()
args.add_argument("--bootstrap", default="127.0.0.1:9092")
args.add_argument("--topic", default="demo")
args.add_argument("-n", type=int, default=1000)
opts = args.parse_args()

admin = AdminClient({"bootstrap.servers": opts.bootstrap})
try:
    admin.create_topics([NewTopic(opts.topic, 6, 1)])[opts.topic].result(timeout=10)
except confluent_kafka.KafkaException as exc:
    if exc.args[0].code() != confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
        raise
producer = confluent_kafka.Producer({"bootstrap.servers": opts.bootstrap, "acks": "all"})
for i in range(opts.n):
    producer.produce(opts.topic, f"record {i}".encode(), key=str(i).encode())
    producer.poll(0)
producer.flush(30)
print(f"produced {opts.n} records to {opts.topic}")
