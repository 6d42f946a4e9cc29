// A transactions-v2 producer whose transaction times out (KIP-890): the coordinator aborts it
// and bumps the epoch, the producer's next send is refused with an abortable error (an old
// epoch), its abort is answered as the retry of the coordinator's, and it carries on at the
// new epoch, not fenced. Prints one line per step, for the test to compare with Kafka's.
//
//     java -cp <kafka libs>:<classes> TimedOutTransaction BOOTSTRAP TRANSACTIONAL_ID TOPIC WAIT_MS

import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;

public final class TimedOutTransaction {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("transactional.id", args[1]);
        p.put("transaction.timeout.ms", "1000");
        p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        String topic = args[2];
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "timed-out")).get();
            Thread.sleep(Long.parseLong(args[3]));
            try {
                producer.send(new ProducerRecord<>(topic, 0, null, "late")).get();
                System.out.println("late send: ok");
            } catch (Exception e) {
                System.out.println("late send: " + e.getCause().getClass().getSimpleName());
            }
            try {
                producer.commitTransaction();
                System.out.println("commit: ok");
            } catch (KafkaException e) {
                System.out.println("commit: " + e.getClass().getSimpleName());
                producer.abortTransaction();
                System.out.println("abort: ok");
            }
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "next")).get();
            producer.commitTransaction();
            System.out.println("next transaction: committed");
        }
    }
}
