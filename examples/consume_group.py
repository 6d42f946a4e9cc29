"""Consume a topic as a member of a consumer group; run it in several shells to watch the
group rebalance. Commits offsets, so a restart resumes where it left off.

    .venv/bin/python examples/consume_group.py [--bootstrap 127.0.0.1:9092] [--topic demo]
                                              [--group demo-group]
"""

import argparse

import confluent_kafka

args = argparse.ArgumentParser()
args.add_argument("--bootstrap", default="127.0.0.1:9092")
args.add_argument("--topic", default="demo")
args.add_argument("--group", default="demo-group")
opts = args.parse_args()


def on_assign(consumer: confluent_kafka.Consumer, partitions: list) -> None:
    print("assigned:", sorted(p.partition for p in partitions))


consumer = confluent_kafka.Consumer(
    {
        "bootstrap.servers": opts.bootstrap,
        "group.id": opts.group,
        "auto.offset.reset": "earliest",
    }
)
consumer.subscribe([opts.topic], on_assign=on_assign)
try:
    while True:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        print(f"p{msg.partition()} @{msg.offset()}: {msg.value().decode()}")
except KeyboardInterrupt:
    pass
finally:
    consumer.close()
