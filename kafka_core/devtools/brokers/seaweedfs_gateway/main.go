// Command seaweedfs-gateway runs a one-node SeaweedFS (master, volume server, filer, MQ broker)
// and its Kafka gateway in one process on loopback, for kafka_core's compatibility tests.
//
// The stock `weed mq.kafka.gateway` refuses to start without a schema registry, and with an
// unreachable one it fails to create ordinary topics; the gateway's Go API starts without one.
// Nothing here is SeaweedFS code: the cluster is the `weed server` command run in-process with
// its own flags, the gateway is gateway.NewServer.
//
// On readiness one line goes to stdout: "seaweedfs-gateway ready <host:port>". Logs go to stderr.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/seaweedfs/seaweedfs/weed/command"
	"github.com/seaweedfs/seaweedfs/weed/glog"
	"github.com/seaweedfs/seaweedfs/weed/mq/kafka/gateway"
	"github.com/seaweedfs/seaweedfs/weed/pb"
	"github.com/seaweedfs/seaweedfs/weed/pb/mq_pb"
	"github.com/seaweedfs/seaweedfs/weed/pb/schema_pb"
	flag "github.com/seaweedfs/seaweedfs/weed/util/fla9"
	"github.com/seaweedfs/seaweedfs/weed/util/grace"
	util_http "github.com/seaweedfs/seaweedfs/weed/util/http"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ReadyPrefix starts the one line printed on stdout once the gateway accepts connections.
const ReadyPrefix = "seaweedfs-gateway ready "

var (
	host       = flag.String("host", "127.0.0.1", "address every server binds to and advertises")
	port       = flag.Int("port", 9092, "Kafka gateway port (0: a free one)")
	dir        = flag.String("dir", "", "data directory (created if missing; required)")
	masterPort = flag.Int("master.port", 0, "master HTTP port (0: a free one); gRPC is -master.port.grpc")
	masterGrpc = flag.Int("master.port.grpc", 0, "master gRPC port (0: a free one)")
	volumePort = flag.Int("volume.port", 0, "volume server HTTP port (0: a free one)")
	volumeGrpc = flag.Int("volume.port.grpc", 0, "volume server gRPC port (0: a free one)")
	filerPort  = flag.Int("filer.port", 0, "filer HTTP port (0: a free one)")
	filerGrpc  = flag.Int("filer.port.grpc", 0, "filer gRPC port (0: a free one)")
	brokerPort = flag.Int("broker.port", 0, "MQ broker gRPC port (0: a free one)")
	partitions = flag.Int("default-partitions", 1, "partitions of a topic the gateway creates on first use")
)

func freePort(h string) int {
	ln, err := net.Listen("tcp", net.JoinHostPort(h, "0"))
	if err != nil {
		glog.Fatalf("no free port on %s: %v", h, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func orFree(p *int) string {
	if *p == 0 {
		*p = freePort(*host)
	}
	return strconv.Itoa(*p)
}

// waitForBalancer returns once the MQ broker can create a topic. The broker refuses until it holds
// the balancer lock in the filer (tens of seconds after start); the gateway's handler does not wait
// for that, so a CreateTopics that came early failed with UNKNOWN_SERVER_ERROR. A ConfigureTopic
// before the broker has even set up its lock client crashes the process, so the lock's owner is
// asked first. The probe topic lives in a namespace of its own: the gateway lists only "kafka".
func waitForBalancer(broker string, timeout time.Duration) {
	dial := grpc.WithTransportCredentials(insecure.NewCredentials())
	deadline := time.Now().Add(timeout)
	for {
		err := pb.WithBrokerGrpcClient(false, broker, dial, func(client mq_pb.SeaweedMessagingClient) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			leader, err := client.FindBrokerLeader(ctx, &mq_pb.FindBrokerLeaderRequest{})
			if err != nil {
				return err
			}
			if leader.Broker == "" {
				return fmt.Errorf("no balancer yet")
			}
			_, err = client.ConfigureTopic(ctx, &mq_pb.ConfigureTopicRequest{
				Topic:          &schema_pb.Topic{Namespace: "kafka_core_probe", Name: "ready"},
				PartitionCount: 1,
			})
			return err
		})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			glog.Fatalf("the MQ broker %s could not create a topic within %v: %v", broker, timeout, err)
		}
		glog.V(1).Infof("MQ broker %s not ready yet: %v", broker, err)
		time.Sleep(250 * time.Millisecond)
	}
}

func findCommand(name string) *command.Command {
	for _, cmd := range command.Commands {
		if cmd.Name() == name && cmd.Run != nil {
			return cmd
		}
	}
	glog.Fatalf("this SeaweedFS has no %q command", name)
	return nil
}

func main() {
	// Logs to stderr only: the default also writes files under the temp directory.
	_ = flag.Set("logtostderr", "true")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "seaweedfs-gateway: -dir is required")
		os.Exit(2)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		glog.Fatalf("data directory %s: %v", *dir, err)
	}
	// The server reads master.toml, volume.toml, security.toml from the working directory among
	// others: run in the data directory so a stray file in the caller's directory is not picked up.
	if err := os.Chdir(*dir); err != nil {
		glog.Fatalf("chdir %s: %v", *dir, err)
	}
	// The gateway advertises this instead of its listen address when set; ours is the truth.
	_ = os.Unsetenv("KAFKA_ADVERTISED_HOST")
	util_http.InitGlobalHttpClient()

	orFree(masterPort)
	orFree(masterGrpc)
	// host:port.grpcPort: SeaweedFS's way to name a server whose gRPC port is not port+10000.
	master := string(pb.NewServerAddress(*host, *masterPort, *masterGrpc))
	args := []string{
		"-ip=" + *host,
		"-dir=" + *dir,
		"-master.port=" + strconv.Itoa(*masterPort),
		"-master.port.grpc=" + strconv.Itoa(*masterGrpc),
		"-master.peers=none",
		"-master.telemetry=false", // never report to the outside world
		"-master.volumeSizeLimitMB=64",
		"-volume.port=" + orFree(volumePort),
		"-volume.port.grpc=" + orFree(volumeGrpc),
		"-volume.max=200", // a volume per topic collection: the default 8 runs out in a test suite
		"-filer",
		"-filer.port=" + orFree(filerPort),
		"-filer.port.grpc=" + orFree(filerGrpc),
		"-filer.localSocket=" + filepath.Join(*dir, "filer.sock"),
		"-mq.broker",
		"-mq.broker.port=" + orFree(brokerPort),
	}
	server := findCommand("server")
	if err := server.Flag.Parse(args); err != nil {
		glog.Fatalf("weed server flags %v: %v", args, err)
	}
	go func() {
		if !server.Run(server, server.Flag.Args()) {
			glog.Fatalf("weed server stopped")
		}
	}()

	waitForBalancer(net.JoinHostPort(*host, strconv.Itoa(*brokerPort)), 3*time.Minute)

	listen := net.JoinHostPort(*host, strconv.Itoa(*port))
	// NewServer waits for the master to list a broker and a filer (it exits on failure).
	srv := gateway.NewServer(gateway.Options{
		Listen:            listen,
		Masters:           master,
		DefaultPartitions: int32(*partitions),
	})
	if err := srv.Start(); err != nil {
		glog.Fatalf("kafka gateway on %s: %v", listen, err)
	}
	// Interrupt hooks run last-registered first: the gateway closes before the cluster under it.
	grace.OnInterrupt(func() { _ = srv.Close() })
	fmt.Printf("%s%s\n", ReadyPrefix, srv.Addr())
	_ = os.Stdout.Sync()
	select {}
}
