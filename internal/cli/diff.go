package cli

import (
	"context"
	"fmt"
	"io"
	"sort"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1alpha1 "github.com/poolsmith/poolsmith/api/v1alpha1"
	"github.com/poolsmith/poolsmith/internal/diff"
	"github.com/poolsmith/poolsmith/internal/render"
)

func newDiffCommand() *cobra.Command {
	var flags inputFlags
	var kubeconfig string
	c := &cobra.Command{
		Use:   "diff -f PATH [--kubeconfig FILE]",
		Short: "Show what applying the classes would change in a live cluster, and what would drift",
		Long: `Render every class and compare each generated object with the live cluster: objects
to create, fields to update (and whether Karpenter would then replace nodes: "will drift"
when Karpenter's own hash changes, "may drift" when AMI, subnet or security-group
selectors change), NodePools the class no longer renders, and names held by objects
Poolsmith does not manage. Exits 1 when anything would change.`,
		Example: `  poolsmith diff -f config/samples/ --kubeconfig ~/.kube/config`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			results, err := flags.renderAll(c, "", "text")
			if err != nil {
				return err
			}
			cl, err := liveClient(kubeconfig)
			if err != nil {
				return err
			}
			changed, err := diffResults(c.Context(), cl, c.OutOrStdout(), results)
			if err != nil {
				return err
			}
			if changed {
				return exitError{ExitFindings}
			}
			return nil
		},
	}
	flags.register(c, "text")
	c.Flags().StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig; defaults to $KUBECONFIG, then ~/.kube/config")
	return c
}

// diffResults prints one line per object and its changed fields; it reports whether
// anything would change.
func diffResults(ctx context.Context, c client.Reader, w io.Writer, results []*render.Result) (bool, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	changed := false
	for _, res := range results {
		objs := []client.Object{res.NodeClass}
		for _, np := range res.NodePools {
			objs = append(objs, np)
		}
		for _, want := range objs {
			c, err := diffObject(ctx, c, w, res.Class, want)
			if err != nil {
				return false, err
			}
			changed = changed || c
		}
		pruned, err := unrendered(ctx, c, res)
		if err != nil {
			return false, err
		}
		for _, name := range pruned {
			fmt.Fprintf(w, "NodePool/%s: no longer rendered by class %s: pruned by its prunePolicy\n", name, res.Class)
			changed = true
		}
	}
	return changed, nil
}

func diffObject(ctx context.Context, c client.Reader, w io.Writer, class string, want client.Object) (bool, error) {
	var have client.Object
	var drift func() diff.Drift
	switch t := want.(type) {
	case *karpv1.NodePool:
		live := &karpv1.NodePool{}
		have, drift = live, func() diff.Drift { return diff.NodePoolDrift(t, live) }
	case *awsv1.EC2NodeClass:
		live := &awsv1.EC2NodeClass{}
		have, drift = live, func() diff.Drift { return diff.NodeClassDrift(t, live) }
	}
	ref := want.GetObjectKind().GroupVersionKind().Kind + "/" + want.GetName()
	if err := c.Get(ctx, client.ObjectKey{Name: want.GetName()}, have); err != nil {
		if apierrors.IsNotFound(err) {
			fmt.Fprintf(w, "%s: create\n", ref)
			return true, nil
		}
		return false, fmt.Errorf("reading %s: %w", ref, err)
	}
	if have.GetLabels()[v1alpha1.LabelClass] != class || have.GetLabels()[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
		fmt.Fprintf(w, "%s: conflict: exists and is not managed by Poolsmith for class %s; the controller leaves it untouched\n", ref, class)
		return true, nil
	}
	wantDoc, err := render.CleanJSON(want)
	if err != nil {
		return false, err
	}
	haveDoc, err := render.CleanJSON(have)
	if err != nil {
		return false, err
	}
	changes := diff.Changes(wantDoc, haveDoc)
	if len(changes) == 0 {
		fmt.Fprintf(w, "%s: unchanged\n", ref)
		return false, nil
	}
	note := ""
	if d := drift(); d != diff.NoDrift {
		note = " (" + string(d) + ")"
	}
	fmt.Fprintf(w, "%s: update%s\n", ref, note)
	for _, ch := range changes {
		fmt.Fprintf(w, "    %s\n", ch)
	}
	return true, nil
}

// unrendered are the class's live NodePools that the render no longer has.
func unrendered(ctx context.Context, c client.Reader, res *render.Result) ([]string, error) {
	list := &karpv1.NodePoolList{}
	if err := c.List(ctx, list, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelClass: res.Class}); err != nil {
		return nil, fmt.Errorf("listing NodePools of class %s: %w", res.Class, err)
	}
	desired := map[string]bool{}
	for _, np := range res.NodePools {
		desired[np.Name] = true
	}
	var out []string
	for _, np := range list.Items {
		if !desired[np.Name] {
			out = append(out, np.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}
