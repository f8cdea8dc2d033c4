package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/poolsmith/poolsmith/internal/catalog"
	"github.com/poolsmith/poolsmith/internal/manifest"
	"github.com/poolsmith/poolsmith/internal/operator"
	"github.com/poolsmith/poolsmith/internal/render"
	"github.com/poolsmith/poolsmith/internal/signals"
)

// SignalsFieldManager applies the signals ConfigMap.
const SignalsFieldManager = "poolsmith-signals"

func newSignalsCommand() *cobra.Command {
	c := &cobra.Command{Use: "signals", Short: "Manage the spot signals ConfigMap the manager watches"}
	var feed, region, configMap, kubeconfig string
	var dryRun bool
	publish := &cobra.Command{
		Use:   "publish --feed FILE [--region R] [--configmap NAMESPACE/NAME]",
		Short: "Publish a Spot Instance Advisor feed as the signals ConfigMap",
		Long: `Keep one region of a Spot Instance Advisor feed (spot-advisor-data.json: the whole feed
is larger than a ConfigMap may be), stamp it with the poolsmith.dev/fetched-at annotation
and server-side apply it as the signals ConfigMap. The refresh CronJob in
config/samples/signals runs this after downloading the feed. --dry-run prints it instead.`,
		Example: `  poolsmith signals publish --feed spot-advisor-data.json --region eu-west-1 --dry-run`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ns, name, ok := strings.Cut(configMap, "/")
			if !ok || ns == "" || name == "" {
				return usageError{fmt.Errorf("--configmap %q must be NAMESPACE/NAME", configMap)}
			}
			if feed == "" {
				return usageError{fmt.Errorf("--feed is required")}
			}
			data, err := manifest.ReadFile(feed)
			if err != nil {
				return inputError{err.Error()}
			}
			filtered, err := signals.FilterFeed(data, region)
			if err != nil {
				return inputError{fmt.Sprintf("%s: %v", feed, err)}
			}
			cm := &corev1.ConfigMap{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
					Annotations: map[string]string{signals.FetchedAtAnnotation: time.Now().UTC().Format(time.RFC3339)}},
				Data: map[string]string{signals.AdvisorKey: string(filtered)},
			}
			if dryRun {
				out, err := yaml.Marshal(cm)
				if err != nil {
					return err
				}
				_, err = c.OutOrStdout().Write(out)
				return err
			}
			cl, err := liveClient(kubeconfig)
			if err != nil {
				return err
			}
			doc, err := render.CleanJSON(cm)
			if err != nil {
				return err
			}
			if err := cl.Apply(c.Context(), client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: doc}),
				client.FieldOwner(SignalsFieldManager), client.ForceOwnership); err != nil {
				return fmt.Errorf("applying ConfigMap %s: %w", configMap, err)
			}
			fmt.Fprintf(c.OutOrStdout(), "ConfigMap %s: %d bytes of spot signals for %s\n", configMap, len(filtered), region)
			return nil
		},
	}
	publish.Flags().StringVar(&feed, "feed", "", "the downloaded spot-advisor-data.json")
	publish.Flags().StringVar(&region, "region", catalog.DefaultRegion, "the region to keep")
	publish.Flags().StringVar(&configMap, "configmap", operator.DefaultSignalsConfigMap.String(), "NAMESPACE/NAME of the signals ConfigMap")
	publish.Flags().StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig; defaults to in-cluster config, then $KUBECONFIG, then ~/.kube/config")
	publish.Flags().BoolVar(&dryRun, "dry-run", false, "print the ConfigMap instead of applying it")
	c.AddCommand(publish)
	return c
}
