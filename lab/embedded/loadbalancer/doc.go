// Package loadbalancer is a lab cluster's cloud load balancer: what a cloud
// provider's (or MetalLB's, or cloud-provider-kind's) load balancer does for
// Services of type LoadBalancer, small enough to read.
//
// The Controller gives every LoadBalancer Service without a
// loadBalancerClass an address from the lab's pool (its
// spec.loadBalancerIP when that is in the pool and free) and writes it to
// the Service's status (ipMode VIP). Then, like a cloud network load
// balancer, it health-checks every node that may take the Service's
// traffic — all but those labelled
// node.kubernetes.io/exclude-from-external-load-balancers — and sends the
// address's traffic to the healthy ones only, unchanged: the packets still
// carry the load-balancer address and the client's own, and each node's
// kube-proxy takes it from there. The health check is kube-proxy's own:
//
//   - externalTrafficPolicy: Local — GET http://NODE:healthCheckNodePort/,
//     which kube-proxy answers 200 while the node has a ready local
//     endpoint of the Service, 503 otherwise;
//   - externalTrafficPolicy: Cluster — GET http://NODE:10256/healthz,
//     kube-proxy's health, which answers 503 when its rules are stale or
//     its node is being deleted or drained (the
//     ToBeDeletedByClusterAutoscaler taint), as cloud providers have done
//     as KEP-3836 recommends.
//
// A node leaves the set after two failed checks in a row and comes back
// after one good one. With no healthy node the address drops its traffic.
// Every change of the set is an event on the Service (reason
// UpdatedLoadBalancer) naming the nodes that take traffic and why the
// others do not.
//
// Where the traffic goes is the Plane's business (the embedded backend:
// ECMP routes in the lab's load-balancer network namespace, hashed on the
// connection's addresses and ports); how a node is asked is the Prober's.
// Both are small interfaces; the tests use fakes of them and of the API.
package loadbalancer
