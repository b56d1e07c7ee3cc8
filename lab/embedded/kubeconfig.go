package embedded

import (
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ContextName is the kubeconfig context of a cluster, "svclab-NAME" (kind
// uses "kind-NAME").
func ContextName(clusterName string) string { return "svclab-" + clusterName }

// Kubeconfig renders a kubeconfig for server that authenticates as userName
// with the client certificate kp and verifies the server against caPEM.
func Kubeconfig(clusterName, server string, caPEM []byte, userName string, kp KeyPair) ([]byte, error) {
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return nil, err
	}
	name := ContextName(clusterName)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[userName] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM(), ClientKeyData: keyPEM}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: userName}
	cfg.CurrentContext = name
	return clientcmd.Write(*cfg)
}
