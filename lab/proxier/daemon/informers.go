package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// proxyLabelSelector is kube-proxy's informer selector: Services (and
// their slices) claimed by another proxy, and headless ones, are ignored.
func proxyLabelSelector() (string, error) {
	noProxyName, err := labels.NewRequirement(labelServiceProxyName, selection.DoesNotExist, nil)
	if err != nil {
		return "", err
	}
	noHeadless, err := labels.NewRequirement(labelHeadless, selection.DoesNotExist, nil)
	if err != nil {
		return "", err
	}
	return labels.NewSelector().Add(*noProxyName, *noHeadless).String(), nil
}

// finalState unwraps a deleted object.
func finalState[T any](obj any) (T, bool) {
	if t, ok := obj.(T); ok {
		return t, true
	}
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		t, ok := tomb.Obj.(T)
		return t, ok
	}
	var zero T
	return zero, false
}

// RunInformers watches Services, EndpointSlices, this node's Node and the
// ServiceCIDRs with client-go informers (resyncing every resync, kube-
// proxy's configSyncPeriod) and feeds p until ctx is done. It returns
// once the informers are started and their caches synced.
func RunInformers(ctx context.Context, logger *slog.Logger, client kubernetes.Interface, p *Proxier, resync time.Duration) error {
	selector, err := proxyLabelSelector()
	if err != nil {
		return fmt.Errorf("label selector: %w", err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.cfg.NodeName).String()
		}))
	cidrFactory := informers.NewSharedInformerFactory(client, resync)

	svcInformer := factory.Core().V1().Services().Informer()
	if _, err := svcInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if svc, ok := obj.(*v1.Service); ok {
				p.OnServiceUpdate(nil, svc)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, _ := old.(*v1.Service)
			if svc, ok := cur.(*v1.Service); ok {
				p.OnServiceUpdate(o, svc)
			}
		},
		DeleteFunc: func(obj any) {
			if svc, ok := finalState[*v1.Service](obj); ok {
				p.OnServiceUpdate(svc, nil)
			}
		},
	}); err != nil {
		return err
	}
	sliceInformer := factory.Discovery().V1().EndpointSlices().Informer()
	if _, err := sliceInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if sl, ok := obj.(*discovery.EndpointSlice); ok {
				p.OnEndpointSliceUpdate(nil, sl)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, _ := old.(*discovery.EndpointSlice)
			if sl, ok := cur.(*discovery.EndpointSlice); ok {
				p.OnEndpointSliceUpdate(o, sl)
			}
		},
		DeleteFunc: func(obj any) {
			if sl, ok := finalState[*discovery.EndpointSlice](obj); ok {
				p.OnEndpointSliceUpdate(sl, nil)
			}
		},
	}); err != nil {
		return err
	}
	nodeInformer := nodeFactory.Core().V1().Nodes().Informer()
	if _, err := nodeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.OnNodeUpdate(asNode(obj)) },
		UpdateFunc: func(_, cur any) { p.OnNodeUpdate(asNode(cur)) },
		DeleteFunc: func(any) { p.OnNodeUpdate(nil) },
	}); err != nil {
		return err
	}
	cidrInformer := cidrFactory.Networking().V1().ServiceCIDRs()
	cidrsChanged := func(any) {
		list, err := cidrInformer.Lister().List(labels.Everything())
		if err != nil {
			logger.ErrorContext(ctx, "listing ServiceCIDRs", "err", err)
			return
		}
		var cidrs []string
		for _, sc := range list {
			cidrs = append(cidrs, serviceCIDRsOf(sc)...)
		}
		slices.Sort(cidrs)
		p.OnServiceCIDRsChanged(slices.Compact(cidrs))
	}
	if _, err := cidrInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    cidrsChanged,
		UpdateFunc: func(_, cur any) { cidrsChanged(cur) },
		DeleteFunc: cidrsChanged,
	}); err != nil {
		return err
	}

	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	cidrFactory.Start(ctx.Done())
	if !cache.WaitForNamedCacheSync("service config", ctx.Done(), svcInformer.HasSynced) {
		return fmt.Errorf("service informer did not sync: %w", ctx.Err())
	}
	p.OnServicesSynced(ctx)
	if !cache.WaitForNamedCacheSync("endpoint slice config", ctx.Done(), sliceInformer.HasSynced) {
		return fmt.Errorf("endpoint slice informer did not sync: %w", ctx.Err())
	}
	p.OnEndpointSlicesSynced(ctx)
	return nil
}

func asNode(obj any) *v1.Node {
	n, _ := obj.(*v1.Node)
	return n
}

func serviceCIDRsOf(sc *networkingv1.ServiceCIDR) []string {
	return append([]string(nil), sc.Spec.CIDRs...)
}
