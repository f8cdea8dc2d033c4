package cli

import (
	"encoding/json"
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
			applied, err := applySignals(c, cm, dryRun, kubeconfig, SignalsFieldManager)
			if err != nil || !applied {
				return err
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
	c.AddCommand(publish, newSignalsCommitmentsCommand())
	return c
}

// applySignals prints the ConfigMap (dryRun) or server-side applies it as fieldManager,
// which then owns exactly the keys and annotations cm holds; applied says it was applied.
func applySignals(c *cobra.Command, cm *corev1.ConfigMap, dryRun bool, kubeconfig, fieldManager string) (applied bool, err error) {
	if dryRun {
		out, err := yaml.Marshal(cm)
		if err != nil {
			return false, err
		}
		_, err = c.OutOrStdout().Write(out)
		return false, err
	}
	cl, err := liveClient(kubeconfig)
	if err != nil {
		return false, err
	}
	doc, err := render.CleanJSON(cm)
	if err != nil {
		return false, err
	}
	if err := cl.Apply(c.Context(), client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: doc}),
		client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("applying ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return true, nil
}

func newSignalsCommitmentsCommand() *cobra.Command {
	var savingsPlans, reservedInstances, region, configMap, kubeconfig string
	var rates []string
	var dryRun bool
	c := &cobra.Command{
		Use:   "commitments [--savings-plans FILE [--rates FILE]...] [--reserved-instances FILE] [--region R] [--configmap NAMESPACE/NAME]",
		Short: "Publish the account's Savings Plans and Reserved Instances, from the AWS CLI's JSON, into the signals ConfigMap",
		Long: `Read what the AWS CLI printed, offline (no AWS call): aws savingsplans
describe-savings-plans (--savings-plans), describe-savings-plan-rates, one file a plan
(--rates, repeated), and aws ec2 describe-reserved-instances (--reserved-instances).
Keep the active and queued Savings Plans that apply in --region (Compute plans, and EC2
Instance plans of the region) with their Linux/UNIX shared-tenancy rates there, and the
active Linux/UNIX default-tenancy Reserved Instances with their amortized hourly price
(FixedPrice over the term's hours, plus UsagePrice and the hourly recurring charges).
Every field kept is checked; an error names the file, the entry and the field.

The result, the ` + signals.CommitmentsKey + ` key, is server-side applied to the signals
ConfigMap with field manager ` + signals.CommitmentsFieldManager + `, which owns only that key,
so signals publish and this command never remove each other's data. --dry-run prints
the ConfigMap instead. See docs/commitments.md.`,
		Example: `  aws savingsplans describe-savings-plans --states active queued > sp.json
  aws savingsplans describe-savings-plan-rates --savings-plan-id sp-0a1b2c3d > rates-sp-0a1b2c3d.json
  aws ec2 describe-reserved-instances --filters Name=state,Values=active > ri.json
  poolsmith signals commitments --savings-plans sp.json --rates rates-sp-0a1b2c3d.json \
    --reserved-instances ri.json --region us-east-1 --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ns, name, ok := strings.Cut(configMap, "/")
			if !ok || ns == "" || name == "" {
				return usageError{fmt.Errorf("--configmap %q must be NAMESPACE/NAME", configMap)}
			}
			if savingsPlans == "" && reservedInstances == "" {
				return usageError{fmt.Errorf("give --savings-plans, --reserved-instances or both")}
			}
			if len(rates) > 0 && savingsPlans == "" {
				return usageError{fmt.Errorf("--rates needs --savings-plans: the rates are of its plans")}
			}
			read := func(flag, path string) (*signals.NamedFile, error) {
				if path == "" {
					return nil, nil
				}
				data, err := manifest.ReadFile(path)
				if err != nil {
					return nil, inputError{flag + ": " + err.Error()}
				}
				return &signals.NamedFile{Name: path, Data: data}, nil
			}
			var in signals.CommitmentExport
			var err error
			if in.SavingsPlans, err = read("--savings-plans", savingsPlans); err != nil {
				return err
			}
			if in.ReservedInstances, err = read("--reserved-instances", reservedInstances); err != nil {
				return err
			}
			for _, r := range rates {
				f, err := read("--rates", r)
				if err != nil {
					return err
				}
				in.Rates = append(in.Rates, *f)
			}
			cat, err := catalog.Load()
			if err != nil {
				return err
			}
			facts, err := signals.ReadCommitments(in, region, cat, time.Now())
			if err != nil {
				return inputError{err.Error()}
			}
			data, err := json.MarshalIndent(facts, "", "  ")
			if err != nil {
				return err
			}
			cm := &corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Data:       map[string]string{signals.CommitmentsKey: string(data)},
			}
			applied, err := applySignals(c, cm, dryRun, kubeconfig, signals.CommitmentsFieldManager)
			if err != nil || !applied {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "ConfigMap %s: %s with %d Savings Plans and %d Reserved Instances for %s\n",
				configMap, signals.CommitmentsKey, len(facts.SavingsPlans), len(facts.ReservedInstances), region)
			return nil
		},
	}
	c.Flags().StringVar(&savingsPlans, "savings-plans", "", "what aws savingsplans describe-savings-plans printed (JSON)")
	c.Flags().StringArrayVar(&rates, "rates", nil, "what aws savingsplans describe-savings-plan-rates printed for one plan (JSON); repeat for each plan")
	c.Flags().StringVar(&reservedInstances, "reserved-instances", "", "what aws ec2 describe-reserved-instances printed (JSON)")
	c.Flags().StringVar(&region, "region", catalog.DefaultRegion, "the region whose plans, rates and Reserved Instances to keep")
	c.Flags().StringVar(&configMap, "configmap", operator.DefaultSignalsConfigMap.String(), "NAMESPACE/NAME of the signals ConfigMap")
	c.Flags().StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig; defaults to in-cluster config, then $KUBECONFIG, then ~/.kube/config")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the ConfigMap instead of applying it")
	return c
}
