# Every input of the deployment, typed and described, validated where a wrong
# value is possible. Defaults reproduce the paper's topology (section 6.3):
# 2 front ends and 1 load driver on m5zn.xlarge, 3 app servers on t3.small,
# DynamoDB as the store, in us-west-2.

# --- General -----------------------------------------------------------------

variable "name" {
  description = "Name prefix for every resource (load balancer and target group names derive from it, so it is kept short)."
  type        = string
  default     = "chopper"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,19}$", var.name))
    error_message = "The name must be 1-20 characters of lowercase letters, digits and hyphens, starting with a letter."
  }
}

variable "region" {
  description = "AWS region to deploy into, e.g. us-west-2 (the paper's region)."
  type        = string
  default     = "us-west-2"

  validation {
    condition     = can(regex("^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]+$", var.region))
    error_message = "The region must look like an AWS region name such as us-west-2 or eu-central-1."
  }
}

variable "tags" {
  description = "Extra tags added to every resource."
  type        = map(string)
  default     = {}
}

# --- Network -----------------------------------------------------------------

variable "vpc_cidr" {
  description = "CIDR block of the VPC created when existing_vpc_id is null. Public and private subnets are carved out of it (one of each per availability zone)."
  type        = string
  default     = "10.40.0.0/16"

  validation {
    condition     = can(cidrhost(var.vpc_cidr, 0)) && try(tonumber(split("/", var.vpc_cidr)[1]) >= 16 && tonumber(split("/", var.vpc_cidr)[1]) <= 24, false)
    error_message = "The vpc_cidr must be an IPv4 CIDR block with a prefix length between /16 and /24."
  }
}

variable "az_count" {
  description = "Number of availability zones the created VPC spans (only zones that offer every chosen instance type are used)."
  type        = number
  default     = 2

  validation {
    condition     = var.az_count >= 2 && var.az_count <= 6 && floor(var.az_count) == var.az_count
    error_message = "The az_count must be a whole number between 2 and 6."
  }
}

variable "nat_gateway_per_az" {
  description = "Create one NAT gateway per availability zone (resilient to a zone outage) instead of a single shared one (cheaper)."
  type        = bool
  default     = false
}

variable "existing_vpc_id" {
  description = "Deploy into this existing VPC instead of creating one. Its private subnets need outbound internet access (NAT) for the instances to boot."
  type        = string
  default     = null

  validation {
    condition     = var.existing_vpc_id == null || can(regex("^vpc-[0-9a-f]{8,17}$", var.existing_vpc_id))
    error_message = "The existing_vpc_id must be null or a VPC id such as vpc-0123456789abcdef0."
  }
}

variable "existing_public_subnet_ids" {
  description = "Public subnets (route to an internet gateway) of existing_vpc_id, in at least two availability zones: the load balancer and the load driver go here."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for s in var.existing_public_subnet_ids : can(regex("^subnet-[0-9a-f]{8,17}$", s))])
    error_message = "Every entry of existing_public_subnet_ids must be a subnet id such as subnet-0123456789abcdef0."
  }

  validation {
    condition     = var.existing_vpc_id == null ? length(var.existing_public_subnet_ids) == 0 : length(var.existing_public_subnet_ids) >= 2
    error_message = "Set existing_public_subnet_ids (at least two) exactly when existing_vpc_id is set."
  }
}

variable "existing_private_subnet_ids" {
  description = "Private subnets of existing_vpc_id, in at least two availability zones: front ends, app servers and controllers go here."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for s in var.existing_private_subnet_ids : can(regex("^subnet-[0-9a-f]{8,17}$", s))])
    error_message = "Every entry of existing_private_subnet_ids must be a subnet id such as subnet-0123456789abcdef0."
  }

  validation {
    condition     = var.existing_vpc_id == null ? length(var.existing_private_subnet_ids) == 0 : length(var.existing_private_subnet_ids) >= 2
    error_message = "Set existing_private_subnet_ids (at least two) exactly when existing_vpc_id is set."
  }
}

variable "allowed_ingress_cidrs" {
  description = "IPv4 CIDR blocks allowed to reach the public load balancer on port 80."
  type        = list(string)
  default     = ["0.0.0.0/0"]

  validation {
    condition     = length(var.allowed_ingress_cidrs) >= 1 && alltrue([for c in var.allowed_ingress_cidrs : can(cidrhost(c, 0))])
    error_message = "The allowed_ingress_cidrs must be a non-empty list of IPv4 CIDR blocks."
  }
}

# --- Instances ---------------------------------------------------------------

variable "frontend_instance_type" {
  description = "EC2 instance type of the front ends (x86_64: the default AMI is amd64)."
  type        = string
  default     = "m5zn.xlarge"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", var.frontend_instance_type)) && !can(regex("^(a1|[a-z]+[0-9]+[a-z]*g[a-z]*)\\.", var.frontend_instance_type))
    error_message = "The frontend_instance_type must be an x86_64 instance type such as m5zn.xlarge (Graviton types need an arm64 ami_id and are not supported by the default AMI)."
  }
}

variable "frontend_count" {
  description = "Number of front ends (the autoscaling group's min, max and desired size)."
  type        = number
  default     = 2

  validation {
    condition     = var.frontend_count >= 1 && var.frontend_count <= 50 && floor(var.frontend_count) == var.frontend_count
    error_message = "The frontend_count must be a whole number between 1 and 50."
  }
}

variable "appserver_instance_type" {
  description = "EC2 instance type of the app servers (x86_64)."
  type        = string
  default     = "t3.small"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", var.appserver_instance_type)) && !can(regex("^(a1|[a-z]+[0-9]+[a-z]*g[a-z]*)\\.", var.appserver_instance_type))
    error_message = "The appserver_instance_type must be an x86_64 instance type such as t3.small."
  }
}

variable "appserver_count" {
  description = "Number of app servers (the autoscaling group's min, max and desired size)."
  type        = number
  default     = 3

  validation {
    condition     = var.appserver_count >= 1 && var.appserver_count <= 100 && floor(var.appserver_count) == var.appserver_count
    error_message = "The appserver_count must be a whole number between 1 and 100."
  }
}

variable "controller_instance_type" {
  description = "EC2 instance type of the controller(s) (x86_64)."
  type        = string
  default     = "t3.small"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", var.controller_instance_type)) && !can(regex("^(a1|[a-z]+[0-9]+[a-z]*g[a-z]*)\\.", var.controller_instance_type))
    error_message = "The controller_instance_type must be an x86_64 instance type such as t3.small."
  }
}

variable "controller_count" {
  description = "Number of controller instances, spread over the private subnets. They elect one leader through the state table; the others stand by and take over when its lease lapses. 1 runs without a standby."
  type        = number
  default     = 2

  validation {
    condition     = var.controller_count >= 1 && var.controller_count <= 3 && floor(var.controller_count) == var.controller_count
    error_message = "The controller_count must be a whole number between 1 and 3."
  }
}

variable "load_driver_enabled" {
  description = "Create the load driver instance (wrk, wrk2 and the project's loadgen) in a public subnet."
  type        = bool
  default     = true
}

variable "load_driver_instance_type" {
  description = "EC2 instance type of the load driver (x86_64)."
  type        = string
  default     = "m5zn.xlarge"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", var.load_driver_instance_type)) && !can(regex("^(a1|[a-z]+[0-9]+[a-z]*g[a-z]*)\\.", var.load_driver_instance_type))
    error_message = "The load_driver_instance_type must be an x86_64 instance type such as m5zn.xlarge."
  }
}

variable "ami_id" {
  description = "AMI for every instance. Null selects the latest Canonical Ubuntu 24.04 LTS amd64 image; a replacement must be Debian-family (apt, systemd, cloud-init) with the SSM agent installed."
  type        = string
  default     = null

  validation {
    condition     = var.ami_id == null || can(regex("^ami-[0-9a-f]{8,17}$", var.ami_id))
    error_message = "The ami_id must be null or an AMI id such as ami-0123456789abcdef0."
  }
}

variable "root_volume_size_gb" {
  description = "Size of each instance's encrypted gp3 root volume, in GiB."
  type        = number
  default     = 16

  validation {
    condition     = var.root_volume_size_gb >= 8 && var.root_volume_size_gb <= 1024 && floor(var.root_volume_size_gb) == var.root_volume_size_gb
    error_message = "The root_volume_size_gb must be a whole number between 8 and 1024."
  }
}

variable "boot_grace_period_seconds" {
  description = "Seconds an autoscaling group waits after launch before health checks count: first boot installs Node, builds native modules and starts the service."
  type        = number
  default     = 600

  validation {
    condition     = var.boot_grace_period_seconds >= 60 && var.boot_grace_period_seconds <= 3600
    error_message = "The boot_grace_period_seconds must be between 60 and 3600."
  }
}

variable "ssh_key_name" {
  description = "EC2 key pair for SSH to the load driver. SSH is off by default (null); use SSM Session Manager instead. Takes effect only together with ssh_cidr_blocks."
  type        = string
  default     = null
}

variable "ssh_cidr_blocks" {
  description = "IPv4 CIDR blocks allowed to SSH to the load driver when ssh_key_name is set. Empty by default: no SSH ingress anywhere."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.ssh_cidr_blocks : can(cidrhost(c, 0))])
    error_message = "Every entry of ssh_cidr_blocks must be an IPv4 CIDR block."
  }
}

# --- Software ----------------------------------------------------------------

variable "source_git_repo" {
  description = "HTTPS URL of the Chopper git repository each instance installs from. Set exactly one of source_git_repo and source_tarball_url."
  type        = string
  default     = null

  validation {
    condition     = var.source_git_repo == null || can(regex("^https://[^\\s'\"]+$", var.source_git_repo))
    error_message = "The source_git_repo must be null or an https:// URL without spaces or quotes."
  }

  validation {
    condition     = (var.source_git_repo == null) != (var.source_tarball_url == null)
    error_message = "Set exactly one of source_git_repo and source_tarball_url."
  }
}

variable "source_git_ref" {
  description = "Branch, tag or full commit SHA of source_git_repo to install."
  type        = string
  default     = "main"

  validation {
    condition     = can(regex("^[A-Za-z0-9._/-]+$", var.source_git_ref))
    error_message = "The source_git_ref must be a branch, tag or commit SHA ([A-Za-z0-9._/-])."
  }
}

variable "source_tarball_url" {
  description = "HTTPS URL of a release tarball (.tar.gz with one top-level directory, as GitHub serves them) to install instead of a git checkout."
  type        = string
  default     = null

  validation {
    condition     = var.source_tarball_url == null || can(regex("^https://[^\\s'\"]+$", var.source_tarball_url))
    error_message = "The source_tarball_url must be null or an https:// URL without spaces or quotes."
  }
}

variable "node_major_version" {
  description = "Major version of Node.js installed from the NodeSource apt repository."
  type        = number
  default     = 20

  validation {
    condition     = var.node_major_version >= 20 && floor(var.node_major_version) == var.node_major_version
    error_message = "The node_major_version must be a whole number, 20 or later (the project's engines field)."
  }
}

# --- Chopper -----------------------------------------------------------------

variable "app" {
  description = "Application the app servers run: kv-cache (local Redis per instance, DynamoDB as the store) or compute."
  type        = string
  default     = "kv-cache"

  validation {
    condition     = contains(["kv-cache", "compute"], var.app)
    error_message = "The app must be one of kv-cache, compute."
  }
}

variable "strategy" {
  description = "Balancing strategy the controller runs: chopper (paper section 5.2), consistent-hash (the paper's baseline), bounded-consistent-hash, neighbour-offload or slicer-weighted (docs/algorithm.md)."
  type        = string
  default     = "chopper"

  validation {
    condition     = contains(["chopper", "consistent-hash", "bounded-consistent-hash", "neighbour-offload", "slicer-weighted"], var.strategy)
    error_message = "The strategy must be one of chopper, consistent-hash, bounded-consistent-hash, neighbour-offload, slicer-weighted."
  }
}

variable "balance_period_ms" {
  description = "How often the controller rebalances, in milliseconds (the paper's experiments use 5 s)."
  type        = number
  default     = 5000

  validation {
    condition     = var.balance_period_ms >= 100 && floor(var.balance_period_ms) == var.balance_period_ms
    error_message = "The balance_period_ms must be a whole number of milliseconds, at least 100."
  }
}

variable "log_level" {
  description = "pino log level of every component."
  type        = string
  default     = "info"

  validation {
    condition     = contains(["fatal", "error", "warn", "info", "debug", "trace", "silent"], var.log_level)
    error_message = "The log_level must be one of fatal, error, warn, info, debug, trace, silent."
  }
}

variable "ddb_table_name" {
  description = "Name of the DynamoDB table (on-demand) the kv-cache app uses as its store."
  type        = string
  default     = "chopper-kv"

  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]{3,255}$", var.ddb_table_name))
    error_message = "The ddb_table_name must be 3-255 characters of letters, digits, '_', '-' and '.'."
  }
}

# --- Ports (defaults are core/settings.js DEFAULT_PORTS) ----------------------

variable "frontend_port" {
  description = "Front ends' data port, the load balancer's target port."
  type        = number
  default     = 8080

  validation {
    condition     = var.frontend_port >= 1024 && var.frontend_port <= 65535 && floor(var.frontend_port) == var.frontend_port
    error_message = "The frontend_port must be a whole number between 1024 and 65535."
  }
}

variable "frontend_control_port" {
  description = "Front ends' control port, where the controller pushes assignments."
  type        = number
  default     = 8081

  validation {
    condition     = var.frontend_control_port >= 1024 && var.frontend_control_port <= 65535 && floor(var.frontend_control_port) == var.frontend_control_port
    error_message = "The frontend_control_port must be a whole number between 1024 and 65535."
  }

  validation {
    condition     = var.frontend_control_port != var.frontend_port
    error_message = "The frontend_control_port must differ from frontend_port."
  }
}

variable "controller_port" {
  description = "Controller's port: registrations, load reports and status (control plane only)."
  type        = number
  default     = 7070

  validation {
    condition     = var.controller_port >= 1024 && var.controller_port <= 65535 && floor(var.controller_port) == var.controller_port
    error_message = "The controller_port must be a whole number between 1024 and 65535."
  }
}

variable "app_port" {
  description = "App servers' data port, where front ends forward requests."
  type        = number
  default     = 9000

  validation {
    condition     = var.app_port >= 1024 && var.app_port <= 65535 && floor(var.app_port) == var.app_port && var.app_port != 6379
    error_message = "The app_port must be a whole number between 1024 and 65535, other than Redis's 6379."
  }
}

variable "app_control_port" {
  description = "App servers' control port, where the controller pushes assignments and reads load."
  type        = number
  default     = 9001

  validation {
    condition     = var.app_control_port >= 1024 && var.app_control_port <= 65535 && floor(var.app_control_port) == var.app_control_port && var.app_control_port != 6379
    error_message = "The app_control_port must be a whole number between 1024 and 65535, other than Redis's 6379."
  }

  validation {
    condition     = var.app_control_port != var.app_port
    error_message = "The app_control_port must differ from app_port."
  }
}
