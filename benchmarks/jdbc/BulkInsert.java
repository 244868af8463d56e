import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;

/**
 * The JDBC side of benchmarks/pgbench_bench.py's bulk figure. Usage: BulkInsert URL TABLE [varied].
 * Prints "ready", then for each number T read from standard input writes rows
 * (T * 1000 + j, text, j) for j in 0..999 as one batch (addBatch/executeBatch) in one transaction,
 * and prints how long that took, in nanoseconds.
 */
public final class BulkInsert {
    private BulkInsert() {}

    public static void main(String[] args) throws Exception {
        String url = args[0];
        String table = args[1];
        boolean varied = args.length > 2 && args[2].equals("varied");
        try (Connection c = DriverManager.getConnection(url, "root", "");
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
            c.setAutoCommit(false);
            try (PreparedStatement ps =
                    c.prepareStatement("INSERT INTO " + table + " (id, v, n) VALUES (?, ?, ?)")) {
                System.out.println("ready");
                System.out.flush();
                for (String line = in.readLine(); line != null; line = in.readLine()) {
                    long t = Long.parseLong(line.trim());
                    long t0 = System.nanoTime();
                    for (int j = 0; j < 1000; j++) {
                        ps.setLong(1, t * 1000 + j);
                        ps.setString(2, varied ? "value " + t + "." + j : "value");
                        ps.setLong(3, j);
                        ps.addBatch();
                    }
                    ps.executeBatch();
                    c.commit();
                    System.out.println(System.nanoTime() - t0);
                    System.out.flush();
                }
            }
        }
    }
}
