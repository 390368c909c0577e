/* samples/broker.c - several rk-bridges behind one endpoint, the ZeroMQ
 * way: a standard broker (zmq_proxy, ROUTER in front, DEALER behind) and
 * nothing of ringkernel's. Clients connect to FRONTEND as they would to one
 * bridge; each request goes to one bridge (ZeroMQ's round robin over the
 * connected ones) and its reply comes back through the envelope the
 * ROUTER added (the bridges answer envelopes of up to 255 frames, so
 * brokers can be chained). A bridge that goes away stops getting requests
 * once its connection closes (ZMQ_IMMEDIATE: none are queued for a bridge
 * that is not connected); the requests it held are lost with it, so a
 * client that must not lose one resends after its timeout with a new id.
 *
 *   cc broker.c $(pkg-config --cflags --libs libzmq) -o broker
 *   ./broker tcp://127.0.0.1:5550 tcp://127.0.0.1:5555 tcp://127.0.0.1:5556
 *
 * Runs until it is stopped (SIGINT, SIGTERM). What the hop costs:
 * rk-bench bridge --broker. */
#include <stdio.h>

#include <zmq.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s FRONTEND BRIDGE_ENDPOINT...\n", argv[0]);
        return 2;
    }
    void *ctx = zmq_ctx_new();
    void *front = zmq_socket(ctx, ZMQ_ROUTER), *back = zmq_socket(ctx, ZMQ_DEALER);
    int one = 1, hwm = 100000;
    /* deep queues both ways: a broker must not be the first to say busy */
    zmq_setsockopt(front, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(front, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(back, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(back, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(back, ZMQ_IMMEDIATE, &one, sizeof one);
    if (zmq_bind(front, argv[1]) != 0) {
        fprintf(stderr, "broker: bind %s: %s\n", argv[1], zmq_strerror(zmq_errno()));
        return 1;
    }
    for (int i = 2; i < argc; i++)
        if (zmq_connect(back, argv[i]) != 0) {
            fprintf(stderr, "broker: connect %s: %s\n", argv[i], zmq_strerror(zmq_errno()));
            return 1;
        }
    printf("broker: %s -> %d bridge(s)\n", argv[1], argc - 2);
    fflush(stdout);
    zmq_proxy(front, back, NULL); /* runs until the process is stopped */
    return 1;
}
