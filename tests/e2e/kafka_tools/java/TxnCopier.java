// A consume-transform-produce application on Kafka's own Java client, the Java sibling of
// tests/e2e/txn_copier.py: it copies every record of an input topic to an output topic in
// transactions that carry the consumed offsets, until the group's committed offsets reach
// the input's end offsets; then it exits 0. An abortable error aborts the transaction and
// rewinds the consumer to its committed offsets; any other failure exits non-zero (the test
// starts it again, as a supervisor would).
//
//     java -cp <kafka libs>:<classes> TxnCopier PARTITIONS BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID
//
// The Java client chooses transactions v2 (KIP-890) when the broker finalizes
// transaction.version 2, which its TransactionManager logs at DEBUG ("isTV2 enabled").

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;

public final class TxnCopier {
    private static final Duration POLL = Duration.ofMillis(500);
    private static final Duration CALL = Duration.ofSeconds(15);

    public static void main(String[] args) {
        int partitions = Integer.parseInt(args[0]);
        String bootstrap = args[1], source = args[2], sink = args[3], group = args[4], txnId = args[5];
        long started = System.nanoTime();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(bootstrap, group));
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap, txnId))) {
            producer.initTransactions();
            consumer.subscribe(List.of(source));
            while (true) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(POLL);
                if (records.isEmpty()) {
                    if (done(consumer, partitions)) break;
                    continue;
                }
                copy(consumer, producer, records, sink);
            }
        }
        System.err.printf("copied in %.1fs%n", (System.nanoTime() - started) / 1e9);
    }

    private static void copy(KafkaConsumer<byte[], byte[]> consumer, KafkaProducer<byte[], byte[]> producer,
                             ConsumerRecords<byte[], byte[]> records, String sink) {
        producer.beginTransaction();
        try {
            for (ConsumerRecord<byte[], byte[]> r : records) {
                producer.send(new ProducerRecord<>(sink, r.partition(), r.key(), r.value()));
            }
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (TopicPartition tp : consumer.assignment()) {
                offsets.put(tp, new OffsetAndMetadata(consumer.position(tp)));
            }
            producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            producer.commitTransaction();
        } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException e) {
            throw e; // fatal: the process ends, the test starts it again
        } catch (KafkaException e) {
            System.err.println("aborting: " + e);
            producer.abortTransaction();
            rewind(consumer);
        }
    }

    private static void rewind(KafkaConsumer<byte[], byte[]> consumer) {
        Set<TopicPartition> assignment = consumer.assignment();
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assignment, CALL);
        for (TopicPartition tp : assignment) {
            OffsetAndMetadata at = committed.get(tp);
            if (at == null) consumer.seekToBeginning(List.of(tp));
            else consumer.seek(tp, at.offset());
        }
    }

    private static boolean done(KafkaConsumer<byte[], byte[]> consumer, int partitions) {
        Set<TopicPartition> assignment = consumer.assignment();
        if (assignment.size() < partitions) return false;
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assignment, CALL);
        Map<TopicPartition, Long> ends = consumer.endOffsets(assignment, CALL);
        for (TopicPartition tp : assignment) {
            OffsetAndMetadata at = committed.get(tp);
            if (at == null || at.offset() != ends.get(tp)) return false;
        }
        return true;
    }

    private static Properties consumerProps(String bootstrap, String group) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("isolation.level", "read_committed");
        p.put("max.poll.records", "50");
        // a killed copier's member leaves when its session ends: a short one keeps the wait short
        p.put("session.timeout.ms", "1000");
        p.put("heartbeat.interval.ms", "250");
        p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        return p;
    }

    private static Properties producerProps(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("linger.ms", "5");
        // v1's AddOffsetsToTxn meets CONCURRENT_TRANSACTIONS while the last transaction's
        // markers are written: retry it sooner than the default 100 ms
        p.put("retry.backoff.ms", "20");
        p.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        return p;
    }
}
