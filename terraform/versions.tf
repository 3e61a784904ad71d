terraform {
  # 1.9 is the first release whose variable validations may refer to other
  # variables (existing_* subnets, source settings).
  required_version = ">= 1.9.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
    # Generates the cluster token (cluster-token.tf).
    random = {
      source  = "hashicorp/random"
      version = "~> 3.6"
    }
  }
}
