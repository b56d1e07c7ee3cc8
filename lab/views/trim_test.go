package views

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTrimObject: what the views keep of an Event the lab wrote is
// bounded, field by field, whatever its size (the API server bounds only
// the whole object); other objects lose their managed fields.
func TestTrimObject(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.1", Namespace: "shop", ResourceVersion: "7", Annotations: map[string]string{"a": huge}},
		InvolvedObject: corev1.ObjectReference{Kind: huge, Name: huge, FieldPath: huge},
		Reason:         huge, Message: huge, Type: huge, Count: 3,
		Source: corev1.EventSource{Component: huge, Host: huge},
		Series: &corev1.EventSeries{Count: 2}, Action: huge, ReportingController: huge, ReportingInstance: huge,
	}
	got, err := trimObject(e)
	if err != nil {
		t.Fatal(err)
	}
	ev := got.(*corev1.Event)
	size := len(ev.Name) + len(ev.Namespace) + len(ev.InvolvedObject.Kind) + len(ev.InvolvedObject.Name) + len(ev.InvolvedObject.FieldPath) +
		len(ev.Reason) + len(ev.Message) + len(ev.Type) + len(ev.Source.Component) + len(ev.Source.Host) + len(ev.Action) +
		len(ev.ReportingController) + len(ev.ReportingInstance) + len(ev.Annotations["a"])
	if size > 6000 || ev.Name != "web.1" || ev.Namespace != "shop" || ev.ResourceVersion != "7" || ev.Count != 3 {
		t.Errorf("kept %d bytes of a huge Event: %.80v", size, ev)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: huge}}}}
	if got, _ := trimObject(svc); len(got.(*corev1.Service).ManagedFields) != 0 {
		t.Error("a Service kept its managed fields")
	}
	tl := TimelineEvent{Kind: huge, Source: huge, Text: huge, Level: huge}.bounded()
	if len(tl.Kind)+len(tl.Source)+len(tl.Text)+len(tl.Level) > maxTimelineText+maxTimelineSource+64+12 {
		t.Errorf("a timeline event kept %d bytes", len(tl.Kind)+len(tl.Source)+len(tl.Text)+len(tl.Level))
	}
}
