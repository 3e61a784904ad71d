# Chopper on AWS: the paper's topology (section 6.3) behind one
# `terraform apply`. Files by concern: network.tf, security.tf, iam.tf,
# dynamodb.tf, cluster-token.tf, load-balancer.tf, controller.tf,
# frontend.tf and appserver.tf (both modules/member), load-driver.tf,
# user-data.tf (boot scripts), outputs.tf.

provider "aws" {
  region = var.region

  default_tags {
    tags = local.tags
  }
}

data "aws_partition" "current" {}

# Canonical's Ubuntu 24.04 LTS: apt has redis-server and wrk, systemd and
# cloud-init run user_data, and the SSM agent is preinstalled (Session
# Manager replaces SSH). With ami_id set, that image is looked up instead so
# its root device name is known.
data "aws_ami" "base" {
  most_recent = true
  owners      = var.ami_id == null ? ["099720109477"] : null

  filter {
    name   = var.ami_id == null ? "name" : "image-id"
    values = [var.ami_id == null ? "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*" : var.ami_id]
  }

  filter {
    name   = "architecture"
    values = ["x86_64"]
  }
}

locals {
  ami_id           = data.aws_ami.base.id
  root_device_name = data.aws_ami.base.root_device_name
}
