// cdcprint reads a ScyllaDB CDC log with scylla-cdc-go and prints every change row it reads, one
// JSON object per line, in the order the library hands them over (per stream, in time order).
// Used by tests/test_cql_cdc_go.py and benchmarks/cql_bench.py against `changefeed serve --cql`.
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
	scyllacdc "github.com/scylladb/scylla-cdc-go"
)

type printer struct {
	mu    sync.Mutex
	out   *bufio.Writer
	quiet bool
	count atomic.Int64
}

func deref(v interface{}) interface{} {
	if v == nil {
		return nil
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Ptr {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	switch x := rv.Interface().(type) {
	case []byte:
		return hex.EncodeToString(x)
	case gocql.UUID:
		return x.String()
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	default:
		return x
	}
}

func (p *printer) consume(ctx context.Context, table string, c scyllacdc.Change) error {
	rows := append(append(append([]*scyllacdc.ChangeRow{}, c.PreImage...), c.Delta...), c.PostImage...)
	// back in log order (cdc$batch_seq_no) from the library's pre/delta/post grouping
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].GetSeqNo() < rows[j].GetSeqNo() })
	p.count.Add(int64(len(rows)))
	if p.quiet {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range rows {
		cols := map[string]interface{}{}
		for name, v := range r.GetRawMapData() {
			if strings.HasPrefix(name, "cdc$") && !strings.HasPrefix(name, "cdc$deleted_") {
				continue
			}
			cols[name] = deref(v)
		}
		line, err := json.Marshal(map[string]interface{}{
			"stream": hex.EncodeToString(c.StreamID),
			"time":   c.Time.String(),
			"seq":    r.GetSeqNo(),
			"end":    r.GetEndOfBatch(),
			"op":     int(r.GetOperation()),
			"ttl":    r.GetTTL(),
			"cols":   cols,
		})
		if err != nil {
			return err
		}
		p.out.Write(line)
		p.out.WriteByte('\n')
	}
	return p.out.Flush()
}

func main() {
	var (
		host     = flag.String("host", "127.0.0.1", "CQL host")
		port     = flag.Int("port", 9042, "CQL port")
		table    = flag.String("table", "ks.t", "base table (keyspace.table)")
		expect   = flag.Int64("expect", 0, "exit once this many change rows were read (0: run until -timeout)")
		timeout  = flag.Duration("timeout", 60*time.Second, "give up after this long")
		since    = flag.Duration("since", time.Hour, "read changes no older than this")
		quiet    = flag.Bool("quiet", false, "count rows, print only the total and the rate")
		user     = flag.String("user", "", "user name (PasswordAuthenticator)")
		password = flag.String("password", "", "password")
		pollFull = flag.Duration("poll-nonempty", 10*time.Millisecond, "delay after a window that had changes")
		pollIdle = flag.Duration("poll-empty", 50*time.Millisecond, "delay after an empty window")
	)
	flag.Parse()
	cluster := gocql.NewCluster(*host)
	cluster.Port = *port
	cluster.ProtoVersion = 4
	cluster.Timeout = 30 * time.Second
	cluster.Consistency = gocql.One
	cluster.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	if *user != "" {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: *user, Password: *password}
	}
	session, err := cluster.CreateSession()
	if err != nil {
		log.Fatalf("connect: %v", err)
	}
	defer session.Close()

	p := &printer{out: bufio.NewWriterSize(os.Stdout, 1<<20), quiet: *quiet}
	logger := log.New(os.Stderr, "cdc: ", log.Ltime|log.Lmicroseconds)
	cfg := &scyllacdc.ReaderConfig{
		Session:               session,
		TableNames:            []string{*table},
		Consistency:           gocql.One,
		ChangeConsumerFactory: scyllacdc.MakeChangeConsumerFactoryFromFunc(p.consume),
		Logger:                logger,
		Advanced: scyllacdc.AdvancedReaderConfig{
			ConfidenceWindowSize:   time.Millisecond,
			PostNonEmptyQueryDelay: *pollFull,
			PostEmptyQueryDelay:    *pollIdle,
			PostFailedQueryDelay:   100 * time.Millisecond,
			QueryTimeWindowSize:    24 * time.Hour,
			ChangeAgeLimit:         *since,
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	reader, err := scyllacdc.NewReader(ctx, cfg)
	if err != nil {
		log.Fatalf("reader: %v", err)
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- reader.Run(ctx) }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil && ctx.Err() == nil {
				log.Fatalf("reader: %v", err)
			}
			fmt.Fprintf(os.Stderr, "rows %d\n", p.count.Load())
			os.Exit(1)
		case <-tick.C:
			if *expect > 0 && p.count.Load() >= *expect {
				elapsed := time.Since(start)
				reader.Stop()
				p.out.Flush()
				fmt.Fprintf(os.Stderr, "rows %d seconds %.3f rate %.0f\n", p.count.Load(), elapsed.Seconds(), float64(p.count.Load())/elapsed.Seconds())
				os.Exit(0)
			}
		}
	}
}
